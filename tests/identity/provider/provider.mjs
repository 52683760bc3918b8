// The OpenID provider of the identity tests: panva's oidc-provider (OpenID Certified), configured from a JSON file.
//
//   node provider.mjs config.json
//
// config.json (written by tests/identity/oidc.py):
//   port        the loopback port; the issuer is http://127.0.0.1:<port>
//   keys        private signing JWKs (RS256), the first signs; a restart with a new first key is a key rotation
//   clients     oidc-provider client metadata, as is
//   resources   resource indicator -> {scope, ttl?, format?: "jwt" | "opaque", audience?}
//   users       account id -> {groups?: [...], scopes?: "space separated"} (scopes: what an exchange may grant them)
//   exchange    {subject_audiences: [...]}: whose access tokens RFC 8693 token exchange accepts as subject tokens
//   not_before  {client_id: seconds}: that client's JWT access tokens carry `nbf` this far in the future
//   client_ttl  {client_id: seconds}: that client's access tokens live this long (whatever the resource says)
//
// Sign-in is oidc-provider's development interactions (any user name, any password): the tests drive its forms
// over HTTP. oidc-provider has no RFC 8693 grant of its own; its documented extension point `registerGrantType`
// takes one, and the tokens are still issued by its own AccessToken model (its keys, its JWT format, its TTLs).
import { readFileSync } from 'node:fs';

import { createLocalJWKSet, jwtVerify } from 'jose';
import Provider, { errors } from 'oidc-provider';

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const issuer = `http://127.0.0.1:${config.port}`;
const users = config.users ?? {};
const resources = config.resources ?? {};
const notBefore = config.not_before ?? {};
const clientTtl = config.client_ttl ?? {};

function resourceServer(indicator, client) {
  const server = resources[indicator];
  if (!server) return undefined;
  return {
    scope: server.scope,
    audience: server.audience,
    accessTokenTTL: clientTtl[client?.clientId] ?? server.ttl ?? 300,
    accessTokenFormat: server.format ?? 'jwt',
    jwt: { sign: { alg: 'RS256' } },
  };
}

const resourceScopes = Object.values(resources).flatMap((server) => server.scope.split(' '));

const provider = new Provider(issuer, {
  clients: config.clients ?? [],
  // the resources' scopes too: a client registering itself (RFC 7591) may name them in its `scope`
  scopes: [...new Set(['openid', 'offline_access', ...resourceScopes])],
  jwks: { keys: config.keys },
  async findAccount(ctx, id) {
    return { accountId: id, async claims() { return { sub: id }; } };
  },
  async extraTokenClaims(ctx, token) {
    const groups = users[token.accountId]?.groups;
    return groups ? { groups } : undefined;
  },
  formats: {
    customizers: {
      async jwt(ctx, token, jwt) {
        const seconds = notBefore[token.clientId];
        if (seconds) jwt.payload.nbf = Math.floor(Date.now() / 1000) + seconds;
      },
    },
  },
  async issueRefreshToken(ctx, client) {
    return client.grantTypeAllowed('refresh_token');
  },
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: true },
    introspection: { enabled: true },
    revocation: { enabled: true },
    clientCredentials: { enabled: true },
    registration: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: async (ctx, client, oneOf) => (oneOf ? oneOf[0] : undefined),
      useGrantedResource: async () => true,
      async getResourceServerInfo(ctx, indicator, client) {
        const server = resourceServer(indicator, client);
        if (!server) throw new errors.InvalidTarget();
        return server;
      },
    },
  },
});

const localKeys = createLocalJWKSet({
  keys: config.keys.map(({ kty, kid, n, e, alg, use }) => ({ kty, kid, n, e, alg, use })),
});

async function tokenExchange(ctx) {
  const { params, client } = ctx.oidc;
  if (params.subject_token_type !== ACCESS_TOKEN_TYPE) {
    throw new errors.InvalidRequest(`subject_token_type must be ${ACCESS_TOKEN_TYPE}`);
  }
  let subject;
  try {
    ({ payload: subject } = await jwtVerify(params.subject_token, localKeys, {
      issuer, audience: config.exchange?.subject_audiences ?? [], typ: 'at+jwt',
    }));
  } catch (error) {
    throw new errors.CustomOIDCProviderError('invalid_grant', `subject_token: ${error.message}`);
  }
  const wanted = [params.resource].flat().filter(Boolean);
  const byAudience = [params.audience].flat().filter(Boolean)
    .map((audience) => Object.keys(resources).find((key) => (resources[key].audience ?? key) === audience));
  const [indicator] = [...wanted, ...byAudience];
  const server = indicator && resourceServer(indicator, client);
  if (!server) throw new errors.InvalidTarget();
  const offered = new Set(server.scope.split(' '));
  const requested = params.scope ? params.scope.split(' ') : [...offered];
  const granted = new Set((users[subject.sub]?.scopes ?? server.scope).split(' '));
  const missing = requested.filter((scope) => !offered.has(scope) || !granted.has(scope));
  if (missing.length) {
    throw new errors.InvalidScope(`not granted to ${subject.sub}: ${missing.join(' ')}`, missing.join(' '));
  }
  const token = new provider.AccessToken({
    accountId: subject.sub, client, gty: 'token_exchange', scope: requested.join(' '),
  });
  token.resourceServer = { ...server, identifier: () => indicator };
  const value = await token.save();
  ctx.body = {
    access_token: value,
    issued_token_type: ACCESS_TOKEN_TYPE,
    token_type: 'Bearer',
    expires_in: token.expiration,
    scope: token.scope,
  };
}

provider.registerGrantType(TOKEN_EXCHANGE, tokenExchange, [
  'audience', 'resource', 'scope', 'requested_token_type', 'subject_token', 'subject_token_type',
  'actor_token', 'actor_token_type',
], ['audience', 'resource']);

provider.listen(config.port, '127.0.0.1', () => {
  process.stdout.write(`listening ${issuer}\n`);
});
