// An OpenID Connect provider on 127.0.0.1 for the sign-in tests: oidc-provider with its development login form
// (any password), one confidential client, and the test's users with their e-mail (verified unless the user says
// email_verified: false), name and groups claims, which
// go into the ID token (st.user shows the ID token's claims). Consent is given at once (a first-party app).
// Signing out (Streamlit's st.logout ends the provider's session too) asks the person to confirm, as providers do.
// Usage: node provider.mjs PORT REDIRECT_URI USERS   (prints "ready" when it listens)
// USERS: a JSON object, or a file holding one, read again at each sign-in (a test changes a user's groups there).
import { readFileSync } from 'node:fs';
import Provider from 'oidc-provider';

const [port, redirectUri, usersArg] = process.argv.slice(2);
const users = () => JSON.parse(usersArg.trimStart().startsWith('{') ? usersArg : readFileSync(usersArg, 'utf8'));

const provider = new Provider(`http://localhost:${port}`, {
  clients: [{
    client_id: 'workbench',
    client_secret: 'workbench-test-secret',
    redirect_uris: [redirectUri],
    post_logout_redirect_uris: [redirectUri],  // where Streamlit's st.logout asks to come back to
    response_types: ['code'],
    grant_types: ['authorization_code'],
  }],
  claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name', 'groups'] },
  conformIdTokenClaims: false,
  pkce: { required: () => false },
  async findAccount(ctx, id) {
    const user = users()[id];
    if (!user) return undefined;
    return {
      accountId: id,
      async claims() {
        return { sub: id, email: user.email, email_verified: user.email_verified ?? true, name: user.name,
                 groups: user.groups };
      },
    };
  },
  async loadExistingGrant(ctx) {
    const grantId = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) return ctx.oidc.provider.Grant.find(grantId);
    const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId,
                                                accountId: ctx.oidc.session.accountId });
    grant.addOIDCScope('openid email profile');
    await grant.save();
    return grant;
  },
});

provider.listen(Number(port), '127.0.0.1', () => console.log('ready'));
