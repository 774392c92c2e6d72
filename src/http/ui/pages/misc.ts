import { html } from '../html.ts';
import { csrfField, page, type Viewer } from '../layout.ts';

export function signInPage(input: { csrf: string; next: string; error?: string }): string {
  const body = html`<div class="signin">
    <h1>Sign in</h1>
    <p>
      Paste a Kubernetes token. The sidecar checks it with the API server (TokenReview) and shows only the
      namespaces its RBAC lets you read, exactly as <code>/v1</code> does. The token is kept sealed in an
      HttpOnly cookie for this site only, for at most 8 hours.
    </p>
    <p class="muted">
      A token for a ServiceAccount: <code>kubectl create token NAME -n NAMESPACE</code>. The local stack's
      demo prints one.
    </p>
    ${input.error !== undefined ? html`<p class="error" role="alert" id="signin-error">${input.error}</p>` : ''}
    <form method="post" action="/ui/sign-in">
      ${csrfField(input.csrf)}<input type="hidden" name="next" value="${input.next}" />
      <p>
        <label for="token">Kubernetes token</label><br />
        <textarea
          id="token"
          name="token"
          required
          autocomplete="off"
          spellcheck="false"
          autocapitalize="off"
        ></textarea>
      </p>
      <p><button type="submit">Sign in</button></p>
    </form>
  </div>`;
  return page('Sign in', undefined, body);
}

/** An error as a page: the same status, code and detail as the problem+json of /v1. */
export function errorPage(
  viewer: Viewer | undefined,
  failure: { status: number; code: string; title: string; detail: string },
): string {
  const body = html`<h1>${failure.title}</h1>
    <p class="error" role="alert">${failure.detail}</p>
    <p class="muted">HTTP ${failure.status} · <code>${failure.code}</code></p>
    <p><a href="/ui/runs">Back to the runs</a></p>`;
  return page(failure.title, viewer, body);
}
