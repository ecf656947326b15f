// Compile-only use of the generated protocol types (protocol/ts): a typed request function keyed by
// the method maps, the way the UI wraps its connection to the sidecar. Checked by protocol-types.test.mjs.
import {
  ErrorCodes,
  PROTOCOL_VERSION,
  type ClientNotifications,
  type ClientRequests,
  type ErrorCode,
  type InitializeResult,
  type ServerNotifications,
  type ServerRequests,
} from "../../protocol/ts/index";

declare function request<M extends keyof ClientRequests>(
  method: M,
  params: ClientRequests[M]["params"],
): Promise<ClientRequests[M]["result"]>;

declare function notify<M extends keyof ClientNotifications>(method: M, params: ClientNotifications[M]["params"]): void;

declare function onNotification<M extends keyof ServerNotifications>(
  method: M,
  handler: (params: ServerNotifications[M]["params"]) => void,
): void;

type ServerRequestHandlers = {
  [M in keyof ServerRequests]: (params: ServerRequests[M] extends { params: infer P } ? P : never) => unknown;
};

export async function session(): Promise<string> {
  const init: InitializeResult = await request("initialize", { clientInfo: { name: "typecheck", version: "0" } });
  const serverName: string = init.serverInfo.name;
  const maxLine: number = init.capabilities.maxLineBytes;

  const slept: number = (await request("debug/sleep", { ms: 10 })).sleptMs;
  const echoed: unknown = (await request("debug/roundTrip", { method: "ui/hello", params: { x: 1 } })).result;
  const pong: Record<string, never> = await request("ping", undefined);

  // @ts-expect-error: debug/sleep needs { ms: number }, so the maps really constrain params.
  await request("debug/sleep", { ms: "10" });
  // @ts-expect-error: not a client request.
  await request("no/such/method", undefined);

  onNotification("$/progress", (p) => {
    const kind: "begin" | "end" | "report" = p.value.kind;
    void kind;
  });
  // Every server-to-client request needs a handler, typed by the contract.
  const handlers: ServerRequestHandlers = {
    "ui/elicit": async (p) => (p.message ? { action: "decline" } : { action: "cancel" }),
    "ui/confirmToolCall": async (p) => (p.toolId === "run_command" ? { decision: "deny" } : { decision: "allowOnce" }),
    "ui/openUrl": async (p) => ({ opened: p.url.startsWith("https://") }),
  };
  onNotification("chat/event", (p) => {
    // The event is a discriminated union on kind.
    if (p.event.kind === "textDelta") {
      const text: string = p.event.text;
      void text;
    }
  });
  void handlers;

  const closed: null = await request("shutdown", undefined);
  notify("exit", undefined);
  notify("$/cancelRequest", { id: "s1" });

  const cancelled: ErrorCode = ErrorCodes.RequestCancelled;
  const version: string = PROTOCOL_VERSION;
  return JSON.stringify([serverName, maxLine, slept, echoed, pong, closed, cancelled, version]);
}
