import { defineConfig } from 'vitest/config';
import base from './vitest.config.js';

/**
 * The fast tier (`npm run test:unit`): the files named `*.unit.test.ts`, which start no service,
 * train no network and run no demo or example. `npm test` runs them along with everything else.
 */
export default defineConfig({
  // Everything of the base config, the entries mapping (`policyloop`, `policyloop/training`, ...) included.
  ...base,
  test: {
    ...base.test,
    include: ['test/**/*.unit.test.ts', 'src/**/*.unit.test.ts'],
  },
});
