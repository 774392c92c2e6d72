// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// ---------------------------------------------------------------------------------------------
// Layers (README "Source layout"). ESLint applies the last matching `no-restricted-imports` only,
// so each directory gets exactly one entry holding all of its restrictions.

/** Modules that do I/O: a pure layer (statements, AIBOM, policy, COSE) imports none of them. */
const IO_MODULES = [
  'fs',
  'node:fs',
  'node:fs/promises',
  'node:net',
  'node:http',
  'node:https',
  'node:http2',
  'node:tls',
  'node:dgram',
  'node:child_process',
  'node:worker_threads',
  'pg',
  'pg-copy-streams',
  '@kubernetes/client-node',
  'fastify',
].map((name) => ({ name, message: 'this layer is pure (no I/O): take the data as an argument' }));

const PG = ['pg', 'pg-copy-streams'].map((name) => ({
  name,
  message: 'only src/vault talks to PostgreSQL: go through a vault repository',
}));

/** Entry points and the auditors' CLI are leaves: only src/bin (and the CLI's own files) import them. */
const ENTRY_POINTS = {
  group: ['**/bin/**', '**/cli/**'],
  message: 'nothing imports src/bin or src/cli except the entry points in src/bin',
};

/** What runs above the vault: the vault (storage) never imports it. */
const ABOVE_VAULT = {
  group: [
    '**/controller/**',
    '**/kube/**',
    '**/queue/**',
    '**/recorder/**',
    '**/transparency/**',
    '**/http/**',
    '**/blob/**',
  ],
  message: 'src/vault is the storage layer: it does not depend on the layers that use it',
};

const NOT_FROM_PURE = {
  group: [
    '**/vault/**',
    '**/blob/**',
    '**/controller/**',
    '**/kube/**',
    '**/queue/**',
    '**/recorder/**',
    '**/transparency/**',
    '**/http/**',
    '**/log/**',
  ],
  message: 'this layer is pure (no I/O): take the data as an argument',
};

const PURE = ['src/attest/**/*.ts', 'src/aibom/**/*.ts', 'src/policy/**/*.ts', 'src/cose/**/*.ts'];

const layers = [
  {
    files: ['src/**/*.ts'],
    ignores: ['src/vault/**', 'src/bin/**', ...PURE],
    rules: { 'no-restricted-imports': ['error', { paths: PG, patterns: [ENTRY_POINTS] }] },
  },
  {
    files: ['src/vault/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [ENTRY_POINTS, ABOVE_VAULT] }] },
  },
  {
    files: PURE,
    rules: {
      'no-restricted-imports': ['error', { paths: IO_MODULES, patterns: [ENTRY_POINTS, NOT_FROM_PURE] }],
    },
  },
  {
    // The C2SP formats (signed notes, checkpoints, cosignatures, tiles, proofs, policies): pure, on
    // top of the RFC 9162 hashing of src/transparency/merkle.ts.
    files: ['src/tlog/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: IO_MODULES,
          patterns: [
            ENTRY_POINTS,
            {
              group: NOT_FROM_PURE.group.filter((g) => g !== '**/transparency/**'),
              message: NOT_FROM_PURE.message,
            },
          ],
        },
      ],
    },
  },
  {
    files: ['src/bin/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { paths: PG }] },
  },
];

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.stack/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-floating-promises': 'error',
      'no-console': ['error', { allow: ['error'] }],
    },
  },
  ...layers,
  {
    files: ['hack/**', 'bench/**', 'src/cli/**', 'src/bin/service-ctl.ts', 'test/**'],
    rules: { 'no-console': 'off' },
  },
  {
    files: ['eslint.config.js'],
    ...tseslint.configs.disableTypeChecked,
  },
);
