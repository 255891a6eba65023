import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

/**
 * The package's entries (`policyloop`, `policyloop/training`, `policyloop/client`, ...) mapped to
 * their sources, read from tsconfig.json's `paths` (which mirror package.json's `exports`), so tests
 * and the example tasks import the package as users do, and the type check and vitest agree.
 */
const paths = (
  JSON.parse(readFileSync(new URL('./tsconfig.json', import.meta.url), 'utf8')) as {
    compilerOptions: { paths: Record<string, string[]> };
  }
).compilerOptions.paths;
const entries = Object.entries(paths).map(([name, [source]]) => ({
  find: new RegExp(`^${name.replace('/', '\\/')}$`),
  replacement: fileURLToPath(new URL(source as string, import.meta.url)),
}));

/**
 * Every test (`npm test`). Files named `*.unit.test.ts` are also the fast tier, `npm run test:unit`
 * (vitest.unit.config.ts): no listening service (an in-process one over a scripted engine is
 * allowed), no network training, no demo or examples.
 */
export default defineConfig({
  resolve: { alias: entries },
  test: {
    include: ['test/**/*.test.ts', 'src/**/*.test.ts'],
    // Integration tests start real local services and train small networks: 2 cores are shared.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: 'forks',
    maxWorkers: 2,
    reporters: ['default', './test/support/summary-reporter.ts'],
  },
});
