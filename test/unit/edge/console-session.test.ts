import test from 'ava';
import { ConsoleSessions, cookieOf, CSRF_HEADER, SESSION_COOKIE, sessionCookie, signInOriginOk } from '../../../edge/admin/console-session.js';
import { request } from '../../helpers/edge-stubs.js';

const ADMIN = 'admin-token-0123456789';

function sessions(now = { t: 1_000_000 }, max = 3) {
  return { now, s: new ConsoleSessions({ ttlMs: 60_000, max, now: () => now.t }) };
}

const withCookie = (id: string, over: Record<string, string> = {}, method = 'GET') =>
  request({ method, headers: { cookie: `other=1; ${SESSION_COOKIE}=${id}`, host: '127.0.0.1:40090', ...over } });

test('the admin token opens a session; its cookie authorizes reads, and changes with its CSRF token from the console\'s origin', (t) => {
  const { s } = sessions();
  const opened = s.signIn(ADMIN, ADMIN);
  t.notThrows(() => s.authorize(withCookie(opened.id)));
  t.notThrows(() => s.authorize(withCookie(opened.id, { [CSRF_HEADER]: opened.csrf, origin: 'http://127.0.0.1:40090' }, 'POST')));
  t.notThrows(() => s.authorize(withCookie(opened.id, { [CSRF_HEADER]: opened.csrf }, 'DELETE')), 'no Origin (a same-origin GET-like client): the CSRF token decides');
  t.is(cookieOf(`a=1; ${SESSION_COOKIE}=${opened.id}`, SESSION_COOKIE), opened.id);
  t.regex(sessionCookie(opened.id, 60, true), /HttpOnly; SameSite=Strict; Max-Age=60; Secure$/);
});

test('hostile: a wrong token, an expired or unknown session, a change without or with another CSRF token, or from another origin: refused', (t) => {
  const { s, now } = sessions();
  t.throws(() => s.signIn('guess', ADMIN), { message: /token: not the admin token/ });
  t.throws(() => s.signIn('', ADMIN), { message: /token/ });
  const a = s.signIn(ADMIN, ADMIN);
  const b = s.signIn(ADMIN, ADMIN);
  t.throws(() => s.authorize(withCookie('forged')), { message: /sign in again/ });
  t.throws(() => s.authorize(request({ method: 'GET', headers: {} })), { message: 'admin token missing or wrong' });
  t.throws(() => s.authorize(withCookie(a.id, {}, 'POST')), { message: /X-CSRF-Token/ });
  t.throws(() => s.authorize(withCookie(a.id, { [CSRF_HEADER]: b.csrf }, 'POST')), { message: /X-CSRF-Token/ }, "another session's CSRF token");
  t.throws(() => s.authorize(withCookie(a.id, { [CSRF_HEADER]: a.csrf, origin: 'http://evil.example' }, 'POST')), { message: /Origin/ });
  t.throws(() => s.authorize(withCookie(a.id, { [CSRF_HEADER]: a.csrf, origin: 'null' }, 'PUT')), { message: /Origin/ });
  now.t += 60_001;
  t.throws(() => s.authorize(withCookie(a.id)), { message: /expired/ });
});

test('S-3: failed sign-ins from anyone (all from 127.0.0.1) never lock out the right token: guesses past 20 a minute are 429, the operator signs in; sessions are bounded (the oldest goes)', (t) => {
  const { s } = sessions();
  for (let i = 0; i < 20; i++) t.throws(() => s.signIn(`guess-${i}`, ADMIN), { message: /not the admin token/ });
  t.throws(() => s.signIn('guess-21', ADMIN), { message: /too many failed sign-ins/ });
  t.truthy(s.signIn(ADMIN, ADMIN).id, 'the right token, in the middle of the flood');
  t.throws(() => s.signIn('guess-22', ADMIN), { message: /too many failed sign-ins/ });
  const first = s.signIn(ADMIN, ADMIN);
  s.signIn(ADMIN, ADMIN);
  s.signIn(ADMIN, ADMIN);
  s.signIn(ADMIN, ADMIN);
  t.is(s.size, 3);
  t.throws(() => s.authorize(withCookie(first.id)), undefined, 'the oldest session was dropped');
});

test('S-3: a sign-in from another origin, or a form posted without an Origin, is refused before any token is compared', (t) => {
  const signIn = (headers: Record<string, string>) => signInOriginOk(request({ method: 'POST', headers: { host: '127.0.0.1:40090', ...headers } }));
  t.true(signIn({ origin: 'http://127.0.0.1:40090', 'content-type': 'application/x-www-form-urlencoded' }), 'the console\'s own form');
  t.true(signIn({ 'content-type': 'application/json' }), 'JSON without an Origin (a script of the same origin, or a tool): another site would need a preflight');
  t.false(signIn({ origin: 'http://evil.example', 'content-type': 'application/x-www-form-urlencoded' }));
  t.false(signIn({ origin: 'http://evil.example', 'content-type': 'application/json' }));
  t.false(signIn({ origin: 'null', 'content-type': 'application/x-www-form-urlencoded' }), 'a sandboxed frame');
  t.false(signIn({ 'content-type': 'application/x-www-form-urlencoded' }), 'a form without an Origin');
  t.false(signIn({ 'content-type': 'text/plain' }), 'JSON text declared text/plain (no preflight) without an Origin');
  t.false(signIn({}), 'no type, no Origin');
});

test('signing out ends the session', (t) => {
  const { s } = sessions();
  const a = s.signIn(ADMIN, ADMIN);
  s.signOut(withCookie(a.id));
  t.throws(() => s.authorize(withCookie(a.id)));
});
