// The record gatehouse holds to keep the tick records' hidden class is one of those records: an
// object with the fields process.nextTick gives each (a change in Node would show here).
import t from "tap";
import { heldTick, holdTickShape } from "../src/lifecycle/tick-shape.js";

t.test("the held object is a tick record, taken once", async (t) => {
  holdTickShape();
  await new Promise((done) => setImmediate(done));
  const held = heldTick();
  t.type(held, "object");
  t.strictSame(Object.keys(held as object), ["callback", "args"], "a tick's own fields");
  const symbols = Object.getOwnPropertySymbols(held).map(String);
  t.ok(symbols.includes("Symbol(async_id_symbol)"), "with its async id");
  holdTickShape();
  await new Promise((done) => setImmediate(done));
  t.equal(heldTick(), held, "a second call keeps the first record");
});
