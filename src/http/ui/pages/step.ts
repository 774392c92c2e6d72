import { html } from '../html.ts';
import { page, short, type Viewer } from '../layout.ts';
import type { VerificationState } from '../verify.ts';
import {
  chainList,
  modelOrTool,
  stepError,
  verificationCell,
  type EnvelopeView,
  type RunView,
} from './run.ts';
import { phaseBadge } from './runs.ts';

export interface StepPageInput {
  readonly viewer: Viewer;
  readonly run: RunView;
  readonly stepId: string;
  /** The step's record, checked; absent while the step has not finished (or is not recorded yet). */
  readonly record?: EnvelopeView & { verification: VerificationState };
}

/**
 * One step of a run with its capability chains as attested in its step record (who granted and
 * approved which scope, the root authority and its key) and that record's verification. The run
 * page links here instead of loading every step record (issue 28).
 */
export function stepPage(input: StepPageInput): string {
  const { run, viewer, stepId, record } = input;
  const step = run.spec.steps.find((s) => s.id === stepId);
  const status = run.steps.find((s) => s.id === stepId);
  const back = html`<p><a href="${`/ui/runs/${run.id}`}">← ${run.name}</a></p>`;
  if (step === undefined) {
    return page(
      `${run.name}: no such step`,
      viewer,
      html`${back}
        <p class="error" role="alert">The run has no step <code>${stepId}</code>.</p>`,
    );
  }
  const body = html`${back}
    <h1><code>${step.id}</code> <span class="muted">of ${run.name} in ${run.namespace}</span></h1>
    <dl class="kv">
      <dt>Model or tool</dt>
      <dd>${modelOrTool(step)}</dd>
      <dt>Phase</dt>
      <dd>${phaseBadge(status?.phase ?? null)}${stepError(status)}</dd>
    </dl>
    <section aria-labelledby="chain-title">
      <h2 id="chain-title">Capability chain as attested</h2>
      ${
        record === undefined
          ? html`<p class="muted">Not attested yet: the step record is made once the step finishes.</p>`
          : html`${chainList(record.capability_chain ?? [])}
              <h3>Step record</h3>
              <dl class="kv">
                <dt>Attestation</dt>
                <dd><code>${record.id}</code></dd>
                <dt>Digest</dt>
                <dd>${short(record.digest, 24)}</dd>
                <dt>Verification</dt>
                <dd>${verificationCell(record.verification)}</dd>
              </dl>`
      }
    </section>`;
  return page(`${step.id} (${run.name})`, viewer, body);
}
