/** `inventory-mirror check`: which workspace is this key for? Writes nothing. */
import { createApi, checkExpectedWorkspace } from "../../sync/sync.js";
import { setup } from "../common.js";
import type { CliValues } from "../options.js";
import { forTerminal } from "../../core/terminal.js";

export default async function check(v: CliValues): Promise<number> {
  const { config, key } = setup(v);
  const { client } = createApi(config, key);
  try {
    const ws = await client.workspace(AbortSignal.timeout(config.http.responseTimeoutMs * 3));
    checkExpectedWorkspace(ws, config);
    if (v.json) process.stdout.write(JSON.stringify({ id: ws.workspace.id, name: ws.workspace.name, scope: ws.scope }) + "\n");
    else process.stdout.write(forTerminal(`workspace id:   ${ws.workspace.id}\nworkspace name: ${ws.workspace.name}\nscope:          ${ws.scope}`) + "\n");
    return 0;
  } finally {
    await client.close();
  }
}
