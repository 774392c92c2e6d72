import { Counter, Gauge, type Registry } from 'prom-client';
import { BaseError } from '../errors.ts';

/**
 * What a process knows about the services it depends on, for `/readyz` and `/metrics`. Each
 * dependency is up or down: a probe (the readiness check pings it, within its own deadline) or a
 * call that failed on it (a reconcile that ended in VaultUnavailable) moves it. The gauge
 * `aibom_vault_dependency_up{dependency}` shows the latest, `aibom_vault_dependency_failures_total`
 * counts failures. Readiness fails while any dependency is down, naming the dependency only (no
 * address or driver message: `/readyz` is unauthenticated).
 */

export const Dependencies = {
  vault: 'vault',
  objectStore: 'object_store',
  kubernetes: 'kubernetes',
  transparency: 'transparency',
} as const;
export type Dependency = (typeof Dependencies)[keyof typeof Dependencies];

const LABELS: Record<Dependency, string> = {
  vault: 'the vault (PostgreSQL)',
  object_store: 'the object store',
  kubernetes: 'the Kubernetes API',
  transparency: 'the transparency service',
};

export interface DependencyHealthOptions {
  readonly registry?: Registry;
  /** Active checks run by `check()`; each must fail within its own deadline. */
  readonly probes?: Partial<Record<Dependency, () => Promise<void>>>;
}

export class DependencyHealth {
  readonly #up = new Map<Dependency, boolean>();
  readonly #probes: Partial<Record<Dependency, () => Promise<void>>>;
  readonly #gauge: Gauge | undefined;
  readonly #failures: Counter | undefined;

  constructor(options: DependencyHealthOptions = {}) {
    this.#probes = options.probes ?? {};
    if (options.registry) {
      this.#gauge = new Gauge({
        name: 'aibom_vault_dependency_up',
        help: '1 while the dependency answers within its deadline, 0 after a failed call or probe',
        labelNames: ['dependency'],
        registers: [options.registry],
      });
      this.#failures = new Counter({
        name: 'aibom_vault_dependency_failures_total',
        help: 'Calls and probes that failed on the dependency (unavailable or past the deadline)',
        labelNames: ['dependency'],
        registers: [options.registry],
      });
      for (const d of Object.keys(this.#probes) as Dependency[]) this.#gauge.set({ dependency: d }, 1);
    }
  }

  ok(dependency: Dependency): void {
    this.#up.set(dependency, true);
    this.#gauge?.set({ dependency }, 1);
  }

  failed(dependency: Dependency): void {
    this.#up.set(dependency, false);
    this.#gauge?.set({ dependency }, 0);
    this.#failures?.inc({ dependency });
  }

  /** Dependencies known to be down. */
  down(): Dependency[] {
    return [...this.#up].filter(([, up]) => !up).map(([d]) => d);
  }

  /**
   * Runs every probe (in parallel), records the outcome, and throws naming the dependencies that
   * are down (probed now, or, for those without a probe, last seen failing).
   */
  async check(): Promise<void> {
    await Promise.all(
      (Object.entries(this.#probes) as [Dependency, () => Promise<void>][]).map(async ([d, probe]) => {
        try {
          await probe();
          this.ok(d);
        } catch {
          this.failed(d);
        }
      }),
    );
    const down = this.down();
    if (down.length > 0) throw new DependenciesUnavailable(down.map((d) => LABELS[d]));
  }
}

/**
 * Not ready because of these dependencies. Their names (`the object store`, …) may be shown to
 * anyone, unauthenticated /readyz included: they say what is down, never where it is (the
 * addresses and the underlying errors go to the log only).
 */
export class DependenciesUnavailable extends BaseError<'DEPENDENCIES_UNAVAILABLE'> {
  readonly dependencies: readonly string[];
  constructor(dependencies: readonly string[]) {
    super('DEPENDENCIES_UNAVAILABLE', `unavailable: ${dependencies.join(', ')}`);
    this.dependencies = dependencies;
  }
}
