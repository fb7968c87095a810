// A real OpenID Connect provider for the tests (node-oidc-provider, certified), on 127.0.0.1.
//
// Started by tests/live/sso/conftest.py with:
//   PORT          the port to listen on (127.0.0.1 only);
//   CLIENTS       a JSON list of clients (client_id, client_secret, redirect_uris,
//                 post_logout_redirect_uris), each allowed the code and refresh grants;
//   STATE_FILE    a JSON file the test writes and may change between two sign-ins:
//                 {"accounts": {"<login>": {"groups": [...], "email", "name",
//                 "preferred_username", "email_verified"}}, "jwks": "own" | "other-key"}
//                 Any login name signs in (the development interactions ask for any login
//                 and password); an account missing from the file has no groups. With
//                 "jwks": "other-key" the provider publishes a key set whose key has the kid
//                 of its signing key but other key material: every ID token it signs is then
//                 signed by a key that is not the issuer's (a forged token, as the relying
//                 party sees it).
//   GROUPS_IN_ID_TOKEN  "1": the ID token carries the scopes' claims (groups too), as
//                 Entra ID or Okta's ID token groups claim do; else only userinfo has them.
//   ACCESS_TOKEN_SECONDS  the access tokens' lifetime (default 3600).
//   STRICT_CLIENT_AUTH  "1" (with one client): the token endpoint takes the client's secret
//                 only the way the client is registered (its token_endpoint_auth_method,
//                 client_secret_basic unless given: an Authorization: Basic header;
//                 client_secret_post: the request body), as Okta does; node-oidc-provider
//                 itself takes either.
import fs from 'node:fs';

import { exportJWK, generateKeyPair } from 'jose';
import Provider from 'oidc-provider';

const port = Number(process.env.PORT);
const clients = JSON.parse(process.env.CLIENTS);
const stateFile = process.env.STATE_FILE;

function state() {
  try {
    return JSON.parse(fs.readFileSync(stateFile, 'utf8'));
  } catch {
    return {};
  }
}

async function signingKey(kid) {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  return { ...(await exportJWK(privateKey)), kid, alg: 'RS256', use: 'sig' };
}

function publicPart({ d, p, q, dp, dq, qi, ...rest }) {
  return rest;
}

const own = await signingKey('test-signing-key');
const other = await signingKey('test-signing-key');

const configuration = {
  clients: clients.map((client) => ({
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    ...client,
  })),
  jwks: { keys: [own] },
  cookies: { keys: ['test-only-cookie-key'] },
  // Every client must use PKCE: a relying party that did not send it is refused.
  pkce: { required: () => true },
  scopes: ['openid', 'offline_access', 'email', 'profile', 'groups'],
  claims: {
    email: ['email', 'email_verified'],
    profile: ['name', 'preferred_username', 'given_name', 'family_name'],
    groups: ['groups'],
  },
  conformIdTokenClaims: process.env.GROUPS_IN_ID_TOKEN !== '1',
  ttl: { AccessToken: Number(process.env.ACCESS_TOKEN_SECONDS || 3600) },
  features: {
    devInteractions: { enabled: true },
    rpInitiatedLogout: { enabled: true },
  },
  async findAccount(ctx, id) {
    return {
      accountId: id,
      async claims() {
        const account = (state().accounts || {})[id] || {};
        return {
          sub: id,
          email: account.email ?? `${id}@example.test`,
          email_verified: account.email_verified ?? true,
          name: account.name ?? id,
          preferred_username: account.preferred_username ?? id,
          groups: account.groups ?? [],
        };
      },
    };
  },
  // First-party clients: what they ask for is granted without a consent screen.
  async loadExistingGrant(ctx) {
    const { oidc } = ctx;
    const grantId = oidc.result?.consent?.grantId || oidc.session.grantIdFor(oidc.client.clientId);
    const grant = grantId
      ? await oidc.provider.Grant.find(grantId)
      : new oidc.provider.Grant({ clientId: oidc.client.clientId, accountId: oidc.session.accountId });
    grant.addOIDCScope(String(oidc.params.scope || 'openid'));
    await grant.save();
    return grant;
  },
};

const provider = new Provider(`http://127.0.0.1:${port}`, configuration);

provider.use(async (ctx, next) => {
  await next();
  if (ctx.path === '/jwks' && state().jwks === 'other-key') {
    ctx.body = { keys: [publicPart(other)] };
  }
});

if (process.env.STRICT_CLIENT_AUTH === '1') {
  const registered = clients[0].token_endpoint_auth_method || 'client_secret_basic';
  provider.use(async (ctx, next) => {
    if (ctx.method === 'POST' && ctx.path === '/token') {
      const basic = /^basic /i.test(ctx.headers.authorization || '');
      if (basic !== (registered === 'client_secret_basic')) {
        ctx.status = 401;
        ctx.body = {
          error: 'invalid_client',
          error_description: `client authentication failed: this client uses ${registered}`,
        };
        return;
      }
    }
    await next();
  });
}

provider.listen(port, '127.0.0.1', () => {
  console.log(`oidc-provider listening on http://127.0.0.1:${port}`);
});
