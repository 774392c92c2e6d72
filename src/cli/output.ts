import { stringify as toYaml } from 'yaml';
import { visibleText } from '../visible.ts';
import { CliError, type OptionSpecs } from './command.ts';

/**
 * How commands print data (`-o`, as kubectl): `json` (pretty, what scripts and `jq` read), `yaml`,
 * or `table` (columns for people). `ndjson` (one JSON value per line, what `service-ctl verify`
 * reads) where a command streams.
 */
export type OutputFormat = 'json' | 'yaml' | 'table' | 'ndjson';

/** The `-o/--output` flag, listing the formats a command offers and what it prints without it. */
export function outputOption(formats: readonly OutputFormat[], defaultText: string) {
  return {
    output: {
      type: 'string',
      short: 'o',
      value: 'FORMAT',
      description: `output format: ${formats.join(', ')} (default ${defaultText})`,
    },
  } as const satisfies OptionSpecs;
}

/** The format asked for, else `fallback`; one the command does not offer is a usage error. */
export function parseOutput(
  value: string | undefined,
  formats: readonly OutputFormat[],
  fallback: OutputFormat,
): OutputFormat {
  const format = (value ?? fallback) as OutputFormat;
  if (!formats.includes(format))
    throw new CliError(`-o/--output: ${value} is not one of ${formats.join(', ')}`, 2);
  return format;
}

export interface Column<T> {
  readonly header: string;
  readonly value: (row: T) => string | number | null | undefined;
}

/** kubectl's table: upper-case headers, columns padded to their widest cell, three spaces apart. */
export function renderTable<T>(rows: readonly T[], columns: readonly Column<T>[]): string {
  const cells = [
    columns.map((c) => c.header.toUpperCase()),
    ...rows.map((r) =>
      columns.map((c) => {
        const v = c.value(r);
        // One line per row: control characters (a newline in a name) would break the columns.
        return v === null || v === undefined || v === ''
          ? '<none>'
          : visibleText(String(v).replace(/\p{Cc}/gu, ' '));
      }),
    ),
  ];
  const widths = columns.map((_, i) => Math.max(...cells.map((row) => row[i]!.length)));
  return (
    cells
      .map((row) => row.map((c, i) => (i === row.length - 1 ? c : c.padEnd(widths[i]!))).join('   '))
      .join('\n') + '\n'
  );
}

/** One value in `format`; `table` renders with `columns` (a list: its rows; an object: one row). */
export function render<T>(
  data: T | readonly T[],
  format: OutputFormat,
  columns?: readonly Column<T>[],
): string {
  switch (format) {
    case 'json':
      return `${JSON.stringify(data, null, 2)}\n`;
    case 'yaml':
      // YAML 1.2, with strings a YAML 1.1 reader (PyYAML) would take for something else quoted.
      return toYaml(data, { lineWidth: 0, aliasDuplicateObjects: false, compat: 'yaml-1.1' });
    case 'ndjson':
      return (Array.isArray(data) ? data : [data]).map((d) => `${JSON.stringify(d)}\n`).join('');
    case 'table':
      if (!columns) throw new CliError('this output has no table form: use -o json or -o yaml', 2);
      return renderTable(Array.isArray(data) ? (data as readonly T[]) : [data as T], columns);
  }
}
