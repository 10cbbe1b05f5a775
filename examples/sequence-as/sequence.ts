// sequence-as: a plugin that answers differently on the first, second and
// third call of each flow, in AssemblyScript.
//
// The call number lives in the flow (key "step" unless the config names
// another) and is advanced with flow_cas, so concurrent calls of one flow
// each get their own number. The answers come from the config:
//   {"first": "pending", "second": "processing", "third": "done"}
// The first two answer 202, the third and every later call 200 with the
// third body.
//
// Two more exports use the same sequence: matches, a predicate that matches
// until the flow has seen three calls (it only reads), and decorate, which
// advances the sequence for any response and adds X-Sequence-Step to it.
import * as rift from "../../sdk/assemblyscript/assembly/index";
export { rift_abi_v1 } from "../../sdk/assemblyscript/assembly/index";

const MAX_TRIES = 64;

export function handle(reqLen: i32): i32 {
  return rift.serve(reqLen, sequence);
}

export function matches(reqLen: i32): i32 {
  return rift.serveMatch(reqLen, inProgress);
}

export function decorate(reqLen: i32): i32 {
  return rift.serveDecorate(reqLen, stamp);
}

function keyOf(cfg: string): string {
  return orDefault(rift.configString(cfg, "key"), "step");
}

function inProgress(req: rift.Request): bool {
  const cur = rift.flowGet(keyOf(rift.config()));
  if (cur.status == rift.NOT_FOUND) return true;
  return cur.status == rift.OK && I64.parseInt(cur.text()) < 3;
}

function stamp(req: rift.Request, resp: rift.Response): rift.Response | null {
  const step = advance(keyOf(rift.config()));
  if (step <= 0) return null; // keep the response when the flow is unreachable
  resp.headers.set("X-Sequence-Step", step.toString());
  return resp;
}

// advance adds one to the flow's call number and returns the new value, or
// 0 when the flow cannot be used.
function advance(key: string): i64 {
  for (let t = 0; t < MAX_TRIES; t++) {
    const cur = rift.flowGet(key);
    let step: i64 = 0;
    let ver: i64 = 0;
    if (cur.status == rift.OK) {
      step = I64.parseInt(cur.text());
      ver = cur.version;
    } else if (cur.status != rift.NOT_FOUND) {
      rift.log(rift.WARN, "sequence-as: flow_get status " + cur.status.toString());
      return 0;
    }
    step++;
    const st = rift.flowCAS(key, ver, step.toString());
    if (st == rift.OK) return step;
    if (st != rift.CAS_MISMATCH) {
      rift.log(rift.WARN, "sequence-as: flow_cas status " + st.toString());
      return 0;
    }
  }
  return 0;
}

function sequence(req: rift.Request): rift.Response | null {
  const cfg = rift.config();
  const step = advance(keyOf(cfg));
  if (step <= 0) return null; // the host answers 503 for an unreachable owner
  if (step == 1) return answer(202, orDefault(rift.configString(cfg, "first"), "first"), step);
  if (step == 2) return answer(202, orDefault(rift.configString(cfg, "second"), "second"), step);
  return answer(200, orDefault(rift.configString(cfg, "third"), "third"), step);
}

function answer(status: i32, body: string, step: i64): rift.Response {
  const r = rift.Response.text(status, body);
  r.headers.set("X-Sequence-Step", step.toString());
  return r;
}

function orDefault(v: string | null, d: string): string {
  return v == null ? d : v;
}
