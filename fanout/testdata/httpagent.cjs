// Runs @ag-ui/client's HttpAgent — the reference AG-UI client: its SSE
// parser, event enforcement, verifier and reducer — against a Threadcast
// agui endpoint, and prints the agent's final messages and state as JSON.
// Usage: node httpagent.cjs <dir with node_modules/@ag-ui/client> <url> <token> <threadId>
const path = require("path");
const { createRequire } = require("module");
const [dir, url, token, threadId] = process.argv.slice(2);
const { HttpAgent } = createRequire(path.join(path.resolve(dir), "package.json"))("@ag-ui/client");
(async () => {
  const agent = new HttpAgent({ url, headers: { Authorization: "Bearer " + token }, threadId });
  try {
    await agent.runAgent({ runId: "interop-" + Date.now() });
    process.stdout.write(JSON.stringify({ messages: agent.messages, state: agent.state }));
  } catch (e) {
    process.stdout.write(JSON.stringify({ error: String((e && e.message) || e) }));
    process.exitCode = 1;
  }
})();
