// chromium.mjs - headless Chromium driven over the DevTools protocol
// (through --remote-debugging-pipe: Node 20's own modules, nothing from
// npm), for tests/cli_serve_page.mjs and tests/serve/cors_browser.mjs.
//
//     const { send, listeners, quit } = chromium("NAME.mjs", "gpt-NAME-", ["--window-size=1000,800"]);
//
// send(method, params, sessionId) returns a promise of the result (an
// error answer rejects it); each listener gets every event. quit(code, why)
// ends Chromium (asked over the protocol, so that it ends its own child
// processes; killed if it has not gone within 5 s), removes the profile
// and exits; the first call decides the exit status. Chromium's children
// may write to the profile for a moment after it has gone, so removing it
// is retried, and a profile that cannot be removed is a note on stderr,
// not a failure (the scripts point TMPDIR into their scratch directory).
// A run past 60 s, a failed start or a closed pipe quits with status 1.
// Environment: CHROMIUM (default chromium).
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export function chromium(name, prefix, extraArgs = []) {
    const profile = mkdtempSync(join(tmpdir(), prefix));
    const chrome = spawn(process.env.CHROMIUM || "chromium",
        ["--headless=new", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage", ...extraArgs,
         `--user-data-dir=${profile}`, "about:blank"],
        { stdio: ["ignore", "ignore", "pipe", "pipe", "pipe"] });
    let chromeErr = "";
    chrome.stderr.on("data", (d) => { chromeErr = (chromeErr + d).slice(-2000); });

    let quitting = false, nextId = 1;
    function quit(code, why) {
        if (quitting) return;
        quitting = true;
        clearTimeout(deadline);
        if (why) console.error(`${name}: ${why}${chromeErr ? `\nchromium said: ${chromeErr}` : ""}`);
        const done = () => {
            try {
                rmSync(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
            } catch (e) {
                console.error(`${name}: note: could not remove the profile ${profile}: ${e.message}`);
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
    return { send, listeners, quit };
}
