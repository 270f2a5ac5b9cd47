// cors_browser.mjs - opens tests/serve/cors_page.html (served from its own
// origin) in headless Chromium over the DevTools protocol (Node's own
// modules, as tests/cli_serve_page.mjs) and runs its run(cfg), for
// tests/cli_serve_cors.sh:
//
//     node tests/serve/cors_browser.mjs PAGE_URL CFG_JSON
//
// Prints {"result": run's answer, "errors": what the page logged} on stdout.
// Environment: CHROMIUM (default chromium).
import { chromium } from "./chromium.mjs";

const [url, cfg] = process.argv.slice(2);
if (!url || !cfg) {
    console.error("usage: node tests/serve/cors_browser.mjs PAGE_URL CFG_JSON");
    process.exit(2);
}
const { send, listeners, quit } = chromium("cors_browser.mjs", "gpt-cors-");

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
    quit(0);
}

main().catch((e) => quit(1, e.message));
