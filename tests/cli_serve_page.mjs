// cli_serve_page.mjs - drives gpt serve's page in headless Chromium over
// the DevTools protocol (through --remote-debugging-pipe: Node 20's own
// modules, nothing from npm), for tests/cli_serve_page.sh.
//
//   node tests/cli_serve_page.mjs URL CASES_JSON SCREENSHOT_DIR
//
// First the page at URL is loaded and watched until it has asked the server
// whether a key is needed (body[data-key] set): what it then shows is
// "loaded": {key: data-key, model: the model named, key_hidden: whether the
// API key field is laid out nowhere (not shown, whatever the attribute)}. CASES_JSON is an array of {field id: value}
// (prompt, max_tokens, temperature, top_p, top_k, seed, stop_text,
// logprobs, key): for each, the fields are typed into the page, Generate is
// clicked, and the page is watched until its stream has ended
// (body[data-state] "done" or "error"); then its text (the completion,
// without the prompt shown before it), the stats line, the error line, the
// model named and the log-probs table's rows ([token, log-prob, {token:
// log-prob} of the alternatives], the exact numbers of its data- attributes)
// are read and a screenshot is written to SCREENSHOT_DIR/N.png.
// Last, the page's Content-Security-Policy is tried: a fetch and a script
// from another origin (127.0.0.2, nothing listens there) must be refused.
// Prints {"loaded": {...}, "runs": [{state, text, stats, error, model,
// logprobs}], "violations": [...], "errors": [...]} (errors: what the page
// logged or threw) on stdout.
// Environment: CHROMIUM (default chromium).
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "./serve/chromium.mjs";

const [url, casesJson, shots] = process.argv.slice(2);
if (!url || !casesJson || !shots) {
    console.error("usage: node tests/cli_serve_page.mjs URL CASES_JSON SCREENSHOT_DIR");
    process.exit(2);
}
const cases = JSON.parse(casesJson);
const { send, listeners, quit } = chromium("cli_serve_page.mjs", "gpt-page-", ["--window-size=1000,800"]);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

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

    const evaluate = async (expression) => {
        const r = await page("Runtime.evaluate", { expression, awaitPromise: true, returnByValue: true });
        if (r.exceptionDetails) throw new Error(`${expression}: ${r.exceptionDetails.text}`);
        return r.result.value;
    };
    let key = "";
    for (let i = 0; i < 300 && !key; i++) {
        key = await evaluate("document.body.dataset.key || ''");
        if (!key) await sleep(100);
    }
    const onLoad = await evaluate(`({ key: document.body.dataset.key || "",
                                      model: document.getElementById("model").textContent,
                                      key_hidden: document.getElementById("keybox").getClientRects().length === 0 })`);
    const runs = [];
    for (const [n, fields] of cases.entries()) {
        for (const [id, value] of Object.entries(fields)) {
            // clear the field and put the caret in it, then type as a user would
            await evaluate(`(() => { const e = document.getElementById(${JSON.stringify(id)});
                                     e.value = ""; e.focus(); return true; })()`);
            if (value !== "") await page("Input.insertText", { text: String(value) });
        }
        const box = await evaluate(`(() => { const r = document.getElementById("go").getBoundingClientRect();
                                             return [r.x + r.width / 2, r.y + r.height / 2]; })()`);
        for (const type of ["mousePressed", "mouseReleased"])
            await page("Input.dispatchMouseEvent", { type, x: box[0], y: box[1], button: "left", clickCount: 1 });
        let state = "";
        for (let i = 0; i < 300 && state !== "done" && state !== "error"; i++) {
            await sleep(100);
            state = await evaluate("document.body.dataset.state");
        }
        const shown = await evaluate(`(() => {
            const out = document.getElementById("out");
            const text = [...out.childNodes].filter((c) => c.nodeType === Node.TEXT_NODE).map((c) => c.data).join("");
            const logprobs = [...document.querySelectorAll("#lptable tbody tr")].map((r) =>
                [r.dataset.token, JSON.parse(r.dataset.logprob), JSON.parse(r.dataset.top)]);
            return { text, stats: document.getElementById("stats").textContent,
                     error: document.getElementById("error").textContent,
                     model: document.getElementById("model").textContent, logprobs };
        })()`);
        runs.push({ state, ...shown });
        const shot = await page("Page.captureScreenshot", { format: "png" });
        writeFileSync(join(shots, `${n}.png`), Buffer.from(shot.data, "base64"));
    }
    const logged = errors.slice();
    // what the policy refuses (each refusal is an event, and a logged error)
    const violations = await evaluate(`new Promise((resolve) => {
        const seen = [];
        document.addEventListener("securitypolicyviolation", (e) => seen.push(e.violatedDirective));
        fetch("http://127.0.0.2:9/x").catch(() => {});
        const s = document.createElement("script");
        s.src = "http://127.0.0.2:9/x.js";
        document.head.append(s);
        setTimeout(() => resolve(seen.sort()), 1500);
    })`);
    console.log(JSON.stringify({ loaded: onLoad, runs, violations, errors: logged }));
    quit(0);
}

main().catch((e) => quit(1, e.message));
