// The console's lint (scripts/test.sh runs it): ESLint's recommended rules
// for the browser modules in scheduler/console/ and for this test. Paths
// are from the repository's root: run it there with -c (see package.json).
import js from '@eslint/js';
import globals from 'globals';

export default [
  { ignores: ['**/node_modules/**', 'target/**'] },
  js.configs.recommended,
  {
    files: ['scheduler/console/**/*.js'],
    languageOptions: { sourceType: 'module', globals: globals.browser },
    rules: { 'no-unused-vars': ['error', { args: 'none' }], eqeqeq: 'error', 'no-var': 'error' },
  },
  {
    files: ['tests/e2e/*.mjs', 'tests/e2e/*.js'],
    languageOptions: { sourceType: 'module', globals: globals.node },
  },
];
