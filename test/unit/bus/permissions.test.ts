import test from 'ava';
import { readFileSync } from 'node:fs';
import { MemoryBus } from '../../../bus/bus-memory.js';
import { GuardedBus } from '../../../bus/guarded.js';
import { BUS_ROLES, covers, EXTERNAL_EVENTS, allowed, allowListMatcher, STATE_ROLES } from '../../../bus/permissions.js';
import { ACTORS, declaredBy, permissionsFor, ROLE_TABLE, statePermissionsFor } from '../../../cli/roles.js';
import { busDeclarationOf } from '../../../lib/runtime/actor-declaration.js';
import { uploadDeclaration } from '../../../actors/upload/declaration.js';
import * as subjects from '../../../bus/subjects.js';
import { streamSubject } from '../../../bus/subjects-stream.js';
import type { AnyLocated } from '../../../bus/exchange.js';
import { patience } from '../../helpers/time.js';

/** Every fixed subject `bus/` declares: endpoints and events (objects with a `subject`), and plain subject strings. */
function declaredSubjects(): string[] {
  const out: string[] = [];
  const walk = (v: unknown) => {
    if (typeof v === 'string' && v.startsWith('pier.')) out.push(v);
    else if (v && typeof v === 'object' && 'subject' in v && typeof (v as { subject: unknown }).subject === 'string') out.push((v as { subject: string }).subject);
    else if (v && typeof v === 'object' && !Array.isArray(v)) Object.values(v).forEach(walk);
  };
  Object.values(subjects).forEach(walk);
  // Subjects built by functions, with a sample id each.
  out.push(subjects.gatewaySubjects.edge('e1'), subjects.gatewaySubjects.user('alice', 'chat'), subjects.gatewaySubjects.deliver('c1'), subjects.gatewaySubjects.settled('e1'));
  out.push(subjects.uploadSubjects.session('u1', 's1'), streamSubject('edge', 'x'), streamSubject('provider', 'x'), subjects.gatewaySubjects.hello('c1'));
  out.push(...BUS_ROLES.map((r) => subjects.processSubjects.heartbeat(r)));
  // A wildcard declared for hearing (every role's heartbeats) is a subscription, not a subject.
  return [...new Set(out)].filter((s) => !s.split('.').includes('*'));
}

test('every subject declared in bus/ is published by some role and heard by some role: none can be forgotten', (t) => {
  // State subjects are published by the state logins, in their own accounts.
  const all = [...BUS_ROLES.map((r) => permissionsFor([r], '_INBOX.x')), ...STATE_ROLES.map((r) => statePermissionsFor(r, '_INBOX.x'))];
  const found = declaredSubjects();
  t.true(found.length >= 35, `found ${found.length} subjects`);
  for (const subject of found) {
    t.true(all.some((p) => allowed(p.publish, subject)), `nobody may publish ${subject}`);
    if (!EXTERNAL_EVENTS.includes(subject)) t.true(all.some((p) => allowed(p.subscribe, subject)), `nobody may subscribe ${subject}`);
  }
});

test('least privilege: the edge cannot reach secrets, mint tokens, write the registry or impersonate an actor', (t) => {
  const edge = permissionsFor(['edge'], '_INBOX.pier-edge');
  for (const s of ['pier.registry.app.credentials', 'pier.registry.user.token', 'pier.registry.user.add', 'pier.registry.app.install', 'pier.registry.app.uninstall', 'pier.vault.rotate', 'pier.vault.audit', 'pier.upload.prepare']) {
    t.false(allowed(edge.publish, s), `edge may publish ${s}`);
  }
  for (const s of ['>', 'pier.>', 'pier.vault.op', 'pier.token.issue', 'pier.registry.app.verify', 'pier.cb.deliver.c1', '_INBOX.>', '_INBOX.pier-token.x']) t.false(allowed(edge.subscribe, s), `edge may subscribe ${s}`);
  // Only the role that bcrypts with app secrets may ask for them; the callback role asks for callback keys.
  t.deepEqual(BUS_ROLES.filter((r) => allowed(declaredBy(r).publish, 'pier.registry.app.credentials')), ['token']);
  t.deepEqual(BUS_ROLES.filter((r) => allowed(declaredBy(r).publish, 'pier.registry.app.callbackkey')), ['callback']);
  // User tokens come only from the admin path.
  t.deepEqual(BUS_ROLES.filter((r) => allowed(declaredBy(r).publish, 'pier.registry.user.token')), ['admin']);
});

test('wildcard coverage follows NATS: * is one token, > one or more', (t) => {
  t.true(covers('pier.gw.edge.*', 'pier.gw.edge.abc'));
  t.false(covers('pier.gw.edge.*', 'pier.gw.edge.abc.def'));
  t.true(covers('pier.stream.edge.>', 'pier.stream.edge.a.b'));
  t.false(covers('pier.stream.edge.>', 'pier.stream.edge'));
  t.false(covers('pier.gw.edge.*', 'pier.gw.edge.>'), 'a * entry does not cover a > subscription');
  t.true(covers('pier.gw.user.*.*', 'pier.gw.user.*.*'));
  t.false(covers('pier.gw.list', 'pier.gw.>'));
});

test('the compiled allow-list answers exactly as checking each pattern does', (t) => {
  const probes = ['pier.gw.edge.abc', 'pier.gw.edge.abc.def', 'pier.stream.edge', 'pier.stream.edge.a.b', 'pier.gw.>', 'pier.gw.list', 'pier.vault.op', 'pier', '', 'pier..x', 'pier.upload.session.b1.s1'];
  for (const role of BUS_ROLES) {
    const { publish, subscribe } = permissionsFor([role], '_INBOX');
    for (const list of [publish, subscribe]) {
      const may = allowListMatcher(list);
      for (const subject of [...probes, ...list]) t.is(may(subject), allowed(list, subject), `${role}: ${subject}`);
    }
  }
  t.false(allowListMatcher([])('pier.gw.list'), 'an empty list allows nothing');
});

test('an allow-list matcher remembers its answers, and stays right past its memory bound', (t) => {
  const may = allowListMatcher(['pier.gw.*.send', 'pier.vault.>']);
  for (let round = 0; round < 2; round++) {
    t.true(may('pier.gw.edge1.send'), `round ${round}: allowed`);
    t.false(may('pier.gw.edge1.close'), `round ${round}: refused`);
    t.false(may('pier.vault'), `round ${round}: '>' needs a token`);
  }
  // Many distinct subjects (connections, users): the memory is emptied, the answers stay the same.
  for (let i = 0; i < 10_000; i++) t.is(may(`pier.gw.e${i}.${i % 2 === 0 ? 'send' : 'drop'}`), i % 2 === 0);
  t.true(may('pier.vault.op.x'));
  t.false(may('pier.gw.edge1.close'));
});

test("a role's view of the bus refuses what the role did not declare, before anything leaves", async (t) => {
  const bus = new MemoryBus();
  const refusals: string[] = [];
  const edge = new GuardedBus(bus, 'edge', permissionsFor(['edge'], '_INBOX'), (role, action, subject) => refusals.push(`${role} ${action} ${subject}`));
  t.throws(() => edge.subscribe('pier.vault.op', () => undefined), { message: 'bus: role edge may not subscribe pier.vault.op' });
  t.throws(() => edge.publish('pier.registry.user.add', new Uint8Array()), { message: /may not publish/ });
  await t.throwsAsync(edge.request('pier.registry.app.credentials', new Uint8Array(), { timeoutMs: 100 }), { message: /may not publish/ });
  t.deepEqual(refusals, ['edge subscribe pier.vault.op', 'edge publish pier.registry.user.add', 'edge publish pier.registry.app.credentials']);
  // What it declared works, replies included.
  const vault = new GuardedBus(bus, 'vault', permissionsFor(['vault'], '_INBOX'));
  vault.subscribe('pier.vault.op', (m) => vault.publish(m.reply!, new Uint8Array([1])));
  t.deepEqual([...(await edge.request('pier.vault.op', new Uint8Array(), { timeoutMs: patience(10_000) })).data], [1]);
  await bus.close();
});

test('no service identity holds a JetStream right: JetStream acts with its account\'s authority, so it lives only in the state accounts', (t) => {
  for (const role of BUS_ROLES) {
    const { publish } = permissionsFor([role], `_INBOX.pier-${role}`);
    t.deepEqual(publish.filter((s) => s.startsWith('$JS') || s.startsWith('$KV') || s === '>' || s.startsWith('_INBOX')), [], `${role} may publish to JetStream`);
  }
  const all = permissionsFor([...BUS_ROLES], '_INBOX.pier-all');
  t.false(all.publish.some((s) => s.startsWith('$JS') || s.startsWith('$KV')));
});

test('each role announces itself on its own heartbeat subject, and on no other role\'s', (t) => {
  for (const role of BUS_ROLES) {
    const mine = permissionsFor([role], '_INBOX.x').publish.filter((s) => s.startsWith('pier.process.heartbeat'));
    t.deepEqual(mine, [`pier.process.heartbeat.${role}`]);
  }
});

test('a state login may touch only its own role\'s streams and its own inbox', (t) => {
  for (const role of STATE_ROLES) {
    const p = statePermissionsFor(role, `_INBOX.pier-${role}-state-${role}`);
    t.deepEqual(p.subscribe, [`_INBOX.pier-${role}-state-${role}.>`]);
    for (const other of STATE_ROLES.filter((r) => r !== role)) {
      const theirs = statePermissionsFor(other, '_INBOX.x').publish.filter((s) => s.startsWith('$JS.API.STREAM.INFO.'));
      for (const s of theirs) t.false(allowed(p.publish, s), `${role}'s state login may reach ${s}`);
    }
    t.false(allowed(p.publish, '$JS.API.STREAM.CREATE.EVIL'));
    t.false(allowed(p.publish, '$JS.API.STREAM.DELETE.EVIL'));
  }
});

test('an actor role\'s rights are its declaration: every endpoint, channel, heard event and timer-free call, and nothing else', (t) => {
  for (const { declaration: actor } of ACTORS) {
    const own = declaredBy(actor.role);
    // An entry on a subject built from a bus id, as one replica's (`b1`) would be.
    const subjectOf = (ex: AnyLocated) => (ex.subject !== undefined ? ex.subject : ex.subjectOf('b1'));
    for (const e of Object.values(actor.serves)) {
      const ex = 'opens' in e ? e.opens : e;
      t.true(allowed(own.subscribe, subjectOf(ex)), `${actor.role} serves ${subjectOf(ex)}`);
    }
    for (const h of Object.values(actor.hears ?? {})) t.true(allowed(own.subscribe, subjectOf(h)), `${actor.role} hears ${subjectOf(h)}`);
    for (const c of actor.calls ?? []) t.true(allowed(own.publish, subjectOf(c)), `${actor.role} calls ${subjectOf(c)}`);
    // Nothing beyond the declaration: each subscribe entry is one of the declared ones.
    const declared = busDeclarationOf(actor);
    const names = (xs: readonly (string | { subject: string })[] | undefined) => (xs ?? []).map((x) => (typeof x === 'string' ? x : x.subject));
    t.deepEqual(own.subscribe, [...names(declared.serves), ...names(declared.hears)], `${actor.role}: its subscriptions are exactly its declaration`);
  }
  // A subject added to an actor's declaration is a right of its role at once, with no second list to edit.
  const extended = { ...uploadDeclaration, serves: { ...uploadDeclaration.serves, extra: subjects.vault.audit } };
  t.true(allowed(busDeclarationOf(extended).serves!.map((s) => (typeof s === 'string' ? s : s.subject)), 'pier.vault.audit'));
  t.false(allowed(declaredBy('upload').subscribe, 'pier.vault.audit'), 'the real upload role does not serve it');
});

test('the roles keeping state on JetStream are those whose declarations own JetStream state', (t) => {
  t.deepEqual([...STATE_ROLES].sort(), BUS_ROLES.filter((r) => ROLE_TABLE[r].jetstream !== undefined).sort());
});

// docs/security.md's table of rights is what operators and reviewers read: it must be the
// declarations, not a copy that drifts (it had lost `pier.cb.moved.*`).
test('the table of rights in docs/security.md is exactly what the declarations grant', (t) => {
  const doc = readFileSync(new URL('../../../../docs/security.md', import.meta.url), 'utf8');
  const subjectsIn = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!).sort();
  for (const role of BUS_ROLES) {
    const row = doc.split('\n').find((l) => l.startsWith(`| ${role} |`));
    t.truthy(row, `docs/security.md has a row for ${role}`);
    const [, , publish, subscribe] = row!.split('|');
    const own = declaredBy(role);
    t.deepEqual(subjectsIn(publish!), [...own.publish].sort(), `${role} publishes`);
    t.deepEqual(subjectsIn(subscribe!), [...own.subscribe].sort(), `${role} subscribes`);
  }
});
