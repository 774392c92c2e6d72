import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';

/** A function of src/ and its length in lines (first to last line, comments inside included). */
export interface FunctionLength {
  /** `path:line`, the path relative to the repository root. */
  readonly at: string;
  /** The function's name, or how it is reached (`createX.method`, `<arrow>` when it has none). */
  readonly name: string;
  readonly lines: number;
}

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

function nameOf(node: ts.Node): string {
  if (
    (ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node) || ts.isFunctionExpression(node)) &&
    node.name !== undefined
  )
    return node.name.getText();
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent))
    return parent.name.getText();
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  return '<arrow>';
}

/**
 * Every function-like node (declarations, expressions, arrows, methods, accessors, constructors)
 * of every .ts file under `dir`, nested ones too: a factory is measured whole, with the closures it
 * returns, because that is the unit a reader has to hold.
 */
export function functionLengths(root: string, dir = 'src'): FunctionLength[] {
  const out: FunctionLength[] = [];
  for (const file of sources(join(root, dir))) {
    const text = readFileSync(file, 'utf8');
    const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
    const visit = (node: ts.Node, outer: string): void => {
      let scope = outer;
      if (ts.isFunctionLike(node) && 'body' in node && node.body !== undefined) {
        const first = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line;
        const last = sf.getLineAndCharacterOfPosition(node.getEnd()).line;
        const own = nameOf(node);
        scope = outer === '' ? own : `${outer}.${own}`;
        out.push({ at: `${relative(root, file)}:${first + 1}`, name: scope, lines: last - first + 1 });
      }
      ts.forEachChild(node, (child) => visit(child, scope));
    };
    visit(sf, '');
  }
  return out;
}
