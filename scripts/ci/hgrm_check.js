// Our .hgrm output against HdrHistogram's JavaScript port reading the same V2 histogram from
// the report: the two texts must be identical, byte for byte.
//   node scripts/ci/hgrm_check.js REPORT.json OURS.hgrm   (hdr-histogram-js on NODE_PATH)
const hdr = require("hdr-histogram-js");
const fs = require("fs");
const [report, ours] = process.argv.slice(2);
const encoded = JSON.parse(fs.readFileSync(report, "utf8")).summary.object_latency.hdr;
const theirs = hdr.decodeFromCompressedBase64(encoded, 64, false).outputPercentileDistribution(5, 1000);
const mine = fs.readFileSync(ours, "utf8");
if (theirs === mine) {
  console.log(`hgrm check: ${ours} is identical to hdr-histogram-js's (${mine.split("\n").length} lines)`);
  process.exit(0);
}
const a = mine.split("\n"), b = theirs.split("\n");
const i = a.findIndex((line, k) => line !== b[k]);
console.error(`hgrm check: ${ours} line ${i + 1} differs:\n  ours:   ${JSON.stringify(a[i])}\n  theirs: ${JSON.stringify(b[i])}`);
process.exit(1);
