// cors_browser.mjs - opens tests/serve/cors_page.html (served from its own
// origin) in headless Chromium over the DevTools protocol (Node's own
// modules, as tests/cli_serve_page.mjs) and runs its run(cfg), for
// tests/cli_serve_cors.sh:
//
//     node tests/serve/cors_browser.mjs PAGE_URL CFG_JSON
//
// Prints {"result": run's answer, "errors": what the page logged} on stdout.
// Environment: CHROMIUM (default chromium).
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [url, cfg] = process.argv.slice(2);
if (!url || !cfg) {
    console.error("usage: node tests/serve/cors_browser.mjs PAGE_URL CFG_JSON");
    process.exit(2);
}
const profile = mkdtempSync(join(tmpdir(), "gpt-cors-"));
const chrome = spawn(process.env.CHROMIUM || "chromium",
    ["--headless=new", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu", "--no-first-run",
     "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
     "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage", `--user-data-dir=${profile}`,
     "about:blank"],
    { stdio: ["ignore", "ignore", "pipe", "pipe", "pipe"] });
let chromeErr = "";
chrome.stderr.on("data", (d) => { chromeErr = (chromeErr + d).slice(-2000); });

// Ends Chromium (Browser.close; killed after 5 s), removes the profile, exits.
let quitting = false, nextId = 1;
function quit(code, why) {
    if (quitting) return;
    quitting = true;
    if (why) console.error(`cors_browser.mjs: ${why}${chromeErr ? `\nchromium said: ${chromeErr}` : ""}`);
    const done = () => {
        try {
            rmSync(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
        } catch (e) {
            console.error(`cors_browser.mjs: note: could not remove the profile ${profile}: ${e.message}`);
        }
        process.exit(code);
    };
    if (chrome.exitCode !== null || chrome.signalCode !== null) return done();
    chrome.on("exit", done);
    setTimeout(() => chrome.kill("SIGKILL"), 5000).unref();
    try {
        chrome.stdio[3].write(JSON.stringify({ id: nextId++, method: "Browser.close" }) + "\0");
    } catch {
        chrome.kill("SIGKILL");
    }
}
chrome.on("error", (e) => quit(1, `cannot run chromium: ${e.message}`));
const deadline = setTimeout(() => quit(1, "timed out after 60 s"), 60000);

// The protocol: JSON messages ended by a NUL byte, ours on fd 3, Chromium's on fd 4.
let inbox = "";
const waiting = new Map(), listeners = [];
chrome.stdio[4].on("data", (d) => {
    inbox += d.toString("utf8");
    let at;
    while ((at = inbox.indexOf("\0")) >= 0) {
        const msg = JSON.parse(inbox.slice(0, at));
        inbox = inbox.slice(at + 1);
        if (msg.id && waiting.has(msg.id)) {
            const { resolve, reject } = waiting.get(msg.id);
            waiting.delete(msg.id);
            if (msg.error) reject(new Error(`${msg.error.message} (${JSON.stringify(msg.error.data || "")})`));
            else resolve(msg.result);
        } else if (msg.method) {
            for (const l of listeners) l(msg);
        }
    }
});
chrome.stdio[4].on("end", () => quit(1, "chromium closed its pipe"));
for (const fd of [3, 4]) chrome.stdio[fd].on("error", (e) => quit(1, `chromium's pipe: ${e.message}`));

function send(method, params = {}, sessionId = undefined) {
    const id = nextId++;
    chrome.stdio[3].write(JSON.stringify({ id, method, params, sessionId }) + "\0");
    return new Promise((resolve, reject) => waiting.set(id, { resolve, reject }));
}

async function main() {
    const { targetId } = await send("Target.createTarget", { url: "about:blank" });
    const { sessionId } = await send("Target.attachToTarget", { targetId, flatten: true });
    const page = (method, params) => send(method, params, sessionId);
    const errors = [];
    let loaded = null;
    listeners.push((m) => {
        if (m.sessionId !== sessionId) return;
        if (m.method === "Page.loadEventFired" && loaded) loaded();
        if (m.method === "Runtime.exceptionThrown") errors.push(m.params.exceptionDetails.text);
        if (m.method === "Log.entryAdded" && m.params.entry.level === "error") errors.push(m.params.entry.text);
    });
    await Promise.all([page("Page.enable"), page("Runtime.enable"), page("Log.enable")]);
    const load = new Promise((r) => { loaded = r; });
    await page("Page.navigate", { url });
    await load;
    const r = await page("Runtime.evaluate", { expression: `run(${cfg})`, awaitPromise: true, returnByValue: true });
    if (r.exceptionDetails) throw new Error(`run: ${r.exceptionDetails.text} ${JSON.stringify(r.exceptionDetails.exception || "")}`);
    console.log(JSON.stringify({ result: r.result.value, errors }));
    clearTimeout(deadline);
    quit(0);
}

main().catch((e) => quit(1, e.message));
