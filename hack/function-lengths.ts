// Lists the functions of src/ longer than a limit (default 150 lines), longest first:
//   node hack/function-lengths.ts [limit]
// test/unit/function-length.test.ts keeps src/ under the limit.
import { join } from 'node:path';
import { functionLengths } from '../test/helpers/function-lengths.ts';

const limit = Number(process.argv[2] ?? 150);
const root = join(import.meta.dirname, '..');
for (const f of functionLengths(root)
  .filter((f) => f.lines > limit)
  .sort((a, b) => b.lines - a.lines)) {
  console.log(`${String(f.lines).padStart(5)}  ${f.name}  ${f.at}`);
}
