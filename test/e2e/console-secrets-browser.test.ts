import test, { type ExecutionContext } from 'ava';
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import type { CallInput } from '../../cli/admin-client.js';
import { ADMIN_API, type AdminRoute } from '../../edge/admin/api.js';
import { adminApi } from '../helpers/admin.js';
import { findChromium } from '../helpers/chromium.js';
import { cleanup, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { CONSOLE_WIDE, launchChromium, shootAtBothWidths, recordRequests, type Sent } from '../helpers/playwright.js';
import { until, within } from '../helpers/wait.js';

/**
 * The console's Secrets view (docs/vault.md "Versions") in Debian's headless Chromium driven by
 * playwright-core, against one `pier start`: the operator picks a user, a workspace and an env, sees
 * the live and the deleted secrets, opens one secret's versions, restores an earlier version and
 * undeletes a deleted secret, each confirmed by a dialog that says what will happen; the vault's
 * refusal (409) is shown in the view. No value is ever in the page, nor in anything the page was
 * sent. Screenshots at 1280 and 390 px go where console-browser.test.ts puts its own
 * (PIER_SCREENSHOTS_DIR, kept; else the test's temp dir, removed): `secrets-1280.png`, `secrets-390.png`.
 */
const chromiumPath = findChromium();
if (!chromiumPath) console.log("console-secrets-browser: skipped — no chromium (as root, `npm test` installs Debian's package; otherwise `apt-get install -y chromium`)");
const maybe = chromiumPath ? test.serial : test.skip;

const WIDE = CONSOLE_WIDE;
const ADMIN_TOKEN = randomBytes(24).toString('base64url');
const PROD = { user: 'alice', workspace: 'chat', env: 'prod' } as const;
const STAGING = { ...PROD, env: 'staging' } as const;
/** Each value unique: a value in the page would be found, not confused with other text. */
const value = (what: string) => `${what}-${randomBytes(12).toString('hex')}`;
/** db.password: written three times (versions 1, 2, 3). */
const PASSWORDS = [value('first'), value('second'), value('third')];
/** api.key: written twice, then deleted (version 2, one earlier version kept). */
const API_KEYS = [value('apikey-1'), value('apikey-2')];
/** dup: deleted, then created again (undelete answers 409). */
const DUPS = [value('dup-deleted'), value('dup-again')];
const OTHER = value('other');
const ALL_VALUES = [...PASSWORDS, ...API_KEYS, ...DUPS, OTHER];

let dir: string;
let pier: PierProcess | undefined;
let browser: Browser | undefined;
let context: BrowserContext;
let page: Page;
let shotsDir: string;
/** Every window.confirm the page asked, in order; each accepted unless `dismissNext` is set. */
const dialogs: string[] = [];
let dismissNext = false;
/** The page's console lines and uncaught exceptions, for a failing test's message. */
const pageLog: string[] = [];
/** What the page asked of the vault's admin routes, and the bodies it was answered. */
let vaultRequests: { sent: Sent[] };
const vaultBodies: Promise<string>[] = [];

const admin = <R extends AdminRoute>(route: R, input?: CallInput<R>) => adminApi(pier!.adminUrl, ADMIN_TOKEN, route, input);

test.before(async () => {
  if (!chromiumPath) return;
  dir = tempDir('pier-console-secrets-');
  pier = await PierProcess.start(pierEnv(join(dir, 'data'), { PIER_ADMIN_TOKEN: ADMIN_TOKEN }));
  shotsDir = resolve(process.env.PIER_SCREENSHOTS_DIR ?? join(dir, 'screenshots'));
  mkdirSync(shotsDir, { recursive: true });

  await admin(ADMIN_API.userAdd, { body: { name: 'alice' } });
  await admin(ADMIN_API.userAdd, { body: { name: 'bob' } });
  for (const v of PASSWORDS) await admin(ADMIN_API.vaultSet, { query: { ...PROD, name: 'db.password' }, body: { value: v } });
  for (const v of API_KEYS) await admin(ADMIN_API.vaultSet, { query: { ...PROD, name: 'api.key' }, body: { value: v } });
  await admin(ADMIN_API.vaultDelete, { query: { ...PROD, name: 'api.key' } });
  await admin(ADMIN_API.vaultSet, { query: { ...PROD, name: 'dup' }, body: { value: DUPS[0] } });
  await admin(ADMIN_API.vaultDelete, { query: { ...PROD, name: 'dup' } });
  await admin(ADMIN_API.vaultSet, { query: { ...PROD, name: 'dup' }, body: { value: DUPS[1] } });
  await admin(ADMIN_API.vaultSet, { query: { ...STAGING, name: 'other.key' }, body: { value: OTHER } });

  browser = await launchChromium(chromiumPath);
  context = await within('a browser context', browser.newContext({ viewport: WIDE }));
  context.setDefaultTimeout(15_000);
  page = await within('a page', context.newPage());
  page.on('dialog', (d) => {
    dialogs.push(d.message());
    void (dismissNext ? d.dismiss() : d.accept());
    dismissNext = false;
  });
  page.on('console', (m) => pageLog.push(`${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => pageLog.push(`exception: ${e.message}`));
  vaultRequests = recordRequests(page, `${pier.adminUrl}/admin/v1/vault/`);
  page.on('response', (r) => {
    if (r.url().startsWith(`${pier!.adminUrl}/admin/v1/vault/`)) vaultBodies.push(r.text().catch(() => ''));
  });
});

test.after.always(async () => {
  await within('chromium to close', browser?.close() ?? Promise.resolve(), 15_000).catch((err: Error) => console.log(`console-secrets-browser: ${err.message}`));
  await pier?.stop();
  if (dir) cleanup(dir);
});

/** Adds the page's last console lines and Pier's warnings to a failing test's log. */
function explain(t: ExecutionContext): void {
  t.teardown(() => {
    if (t.passed) return;
    t.log(`page console (last 10): ${pageLog.slice(-10).join(' | ') || '(nothing)'}`);
    t.log(pier?.report());
  });
}

/** Clicks the view's link in the navigation and waits for its heading. */
async function show(p: Page, title: string): Promise<void> {
  await p.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: title, exact: true }).click();
  await p.waitForFunction((name) => document.getElementById('view-title')?.textContent === name, title, { timeout: 10_000 }).catch((err: Error) => {
    throw new Error(`waiting for the ${title} view's heading: ${err.message.split('\n')[0]}`);
  });
}

/** Full-page screenshots at 1280 and 390 px wide (`<name>-1280.png`, `<name>-390.png`), as console-browser.test.ts takes them; back to 1280 after. */
/** Screenshots at both widths into the run's folder (test/helpers/playwright.ts). */
const shoot = (p: Page, name: string, ready?: () => Promise<unknown>) => shootAtBothWidths(p, shotsDir, name, ready);

/** The text of each cell of the rows matching `selector`. */
const cellsOf = (p: Page, selector: string): Promise<string[][]> => p.locator(selector).evaluateAll((rows) => rows.map((r) => [...(r as HTMLTableRowElement).cells].map((c) => (c.textContent ?? '').trim())));

/** The rows matching `selector` once they are `expected` (compared as JSON), with a deadline. */
async function rowsBecome(p: Page, what: string, selector: string, expected: string[][]): Promise<string[][]> {
  return until(
    what,
    async () => {
      const rows = await cellsOf(p, selector);
      return JSON.stringify(rows) === JSON.stringify(expected) ? rows : undefined;
    },
    15_000,
    50,
  ).catch(async (err: Error) => {
    throw new Error(`${err.message}; shown: ${JSON.stringify(await cellsOf(p, selector))}, expected ${JSON.stringify(expected)}`);
  });
}

/** An ISO time as the console writes it (console/format.js `stamp`). */
const stamp = (iso: string) => iso.replace('T', ' ').slice(0, 19);

/** The seeded values found in the page's visible text (document.body.innerText) and in its markup. */
const valuesIn = async (p: Page): Promise<string[]> => {
  const text = await p.evaluate(() => document.body.innerText);
  const markup = await p.content();
  return ALL_VALUES.filter((v) => text.includes(v) || markup.includes(v));
};

/** Picks the user, the workspace and the env in the view's form and waits for the workspace's lists to be asked. */
async function choose(p: Page, target: { user: string; workspace: string; env: string }): Promise<void> {
  const form = p.locator('form.inline');
  await form.locator(`#secrets-user option[value="${target.user}"]`).waitFor({ state: 'attached' });
  await form.getByLabel('User', { exact: true }).selectOption(target.user);
  await form.getByLabel('Workspace', { exact: true }).fill(target.workspace);
  await form.getByLabel('Env', { exact: true }).selectOption(target.env);
  const asked = (path: string) =>
    p.waitForResponse((r) => {
      const u = new URL(r.url());
      return u.pathname === path && u.searchParams.get('user') === target.user && u.searchParams.get('workspace') === target.workspace && u.searchParams.get('env') === target.env;
    });
  const answers = Promise.all([asked('/admin/v1/vault/secrets'), asked('/admin/v1/vault/deleted')]);
  await form.getByRole('button', { name: 'Show', exact: true }).click();
  for (const r of await answers) if (r.status() !== 200) throw new Error(`${r.url()} answered ${r.status()}`);
}

maybe('secrets: pick a user, a workspace (a bad name refused by the form) and an env; the live and the deleted secrets listed, as the admin API lists them; no value', async (t) => {
  t.timeout(60_000);
  explain(t);
  await page.goto(`${pier!.adminUrl}/console/`, { timeout: 20_000 });
  await page.getByLabel('Admin token').fill(ADMIN_TOKEN);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Views' }).waitFor();
  await show(page, 'Secrets');
  t.is(await page.getByLabel('Env', { exact: true }).inputValue(), 'prod', 'prod is the default env');

  // The user chosen: only the workspace's name holds the form back.
  await page.locator('#secrets-user option[value="alice"]').waitFor({ state: 'attached' });
  await page.getByLabel('User', { exact: true }).selectOption('alice');
  const workspace = page.getByLabel('Workspace', { exact: true });
  await workspace.fill('chat/../etc');
  t.true(await workspace.evaluate((el) => (el as HTMLInputElement).validity.patternMismatch), 'a name the vault refuses is flagged by the form');
  const before = vaultRequests.sent.length;
  await page.getByRole('button', { name: 'Show', exact: true }).click();
  t.is(await page.locator('#secrets-where').count(), 0, 'no workspace shown');
  t.is(vaultRequests.sent.length, before, 'nothing asked of the vault');

  // Another env of the same workspace holds other secrets: the env chosen is the env asked.
  await choose(page, STAGING);
  await rowsBecome(page, 'the live secrets of staging', 'tr[data-secret]', [['other.key', '1', stamp((await admin(ADMIN_API.vaultList, { query: STAGING }))[0].updatedAt), '(operator)', 'Versions']]);
  t.is(await page.locator('tr[data-deleted]').count(), 0);

  await choose(page, PROD);
  t.is(await page.locator('#secrets-where').textContent(), 'Workspace chat of alice, prod');
  // Columns: Secret (th), Version, Updated, By, actions.
  const live = await admin(ADMIN_API.vaultList, { query: PROD });
  t.deepEqual(live.map((s) => [s.name, s.version]).sort(), [['db.password', 3], ['dup', 1]]);
  await rowsBecome(page, 'the live secrets of prod', 'tr[data-secret]', live.map((s) => [s.name, String(s.version), stamp(s.updatedAt), '(operator)', 'Versions']));
  // Columns: Secret (th), Version, Deleted, By, Destroyed at, Earlier versions kept, actions.
  const deleted = await admin(ADMIN_API.vaultDeleted, { query: PROD });
  t.deepEqual(deleted.map((d) => [d.name, d.version, d.versionsKept]).sort(), [['api.key', 2, 1], ['dup', 1, 0]]);
  await rowsBecome(page, 'the deleted secrets of prod', 'tr[data-deleted]', deleted.map((d) => [d.name, String(d.version), stamp(d.deletedAt), '(operator)', stamp(d.destroyAt), String(d.versionsKept), 'Versions Undelete']));
  await page.getByText('Live secrets (2)').waitFor();
  await page.getByText('Deleted secrets (2)').waitFor();
  t.deepEqual(await valuesIn(page), [], 'no value in the page');
});

maybe("versions: who wrote each version of db.password, when, its size and whether it is kept; no value anywhere in the page (a value put in the page is found: the check can fail)", async (t) => {
  t.timeout(60_000);
  explain(t);
  await page.locator('tr[data-secret="db.password"]').getByRole('button', { name: 'Versions of db.password' }).click();
  await page.getByRole('heading', { name: 'Versions of db.password' }).waitFor();
  t.true(await page.getByRole('heading', { name: 'Versions of db.password' }).evaluate((h) => h === document.activeElement), 'the panel takes the focus');
  const listed = await admin(ADMIN_API.vaultVersions, { query: { ...PROD, name: 'db.password' } });
  t.deepEqual(listed.versions.map((v) => [v.version, v.size, v.current, v.kept]), [[3, Buffer.byteLength(PASSWORDS[2]), true, true], [2, Buffer.byteLength(PASSWORDS[1]), false, true], [1, Buffer.byteLength(PASSWORDS[0]), false, true]]);
  // Columns: Version (th), Written, By, Size, State, actions.
  await rowsBecome(page, "db.password's three versions, newest first", 'tr[data-version]', listed.versions.map((v) => [String(v.version), stamp(v.at), '(operator)', `${v.size} B`, v.current ? 'current' : 'kept', v.current ? '' : 'Restore']));
  await page.getByText('3 versions, newest first').waitFor();

  t.deepEqual(await valuesIn(page), [], 'no value in the page');
  // The control: the same check finds a value once it is in the page.
  await page.evaluate((v) => {
    const p = document.createElement('p');
    p.id = 'control';
    p.textContent = v;
    document.body.append(p);
  }, PASSWORDS[1]);
  t.deepEqual(await valuesIn(page), [PASSWORDS[1]], 'the check sees a value in the page');
  await page.evaluate(() => document.getElementById('control')?.remove());
  t.deepEqual(await valuesIn(page), []);
});

maybe('restore: a dismissed confirmation changes nothing; confirmed, it says what will happen, and version 1 comes back as version 4 (in the view and in the admin API)', async (t) => {
  t.timeout(60_000);
  explain(t);
  const restores = () => vaultRequests.sent.filter((s) => s.url.includes('/admin/v1/vault/secret/restore'));
  const button = page.locator('tr[data-version="1"]').getByRole('button', { name: 'Restore version 1 of db.password' });
  const expected = 'Restore version 1 of db.password (workspace chat of alice, prod)? Its value becomes version 4, the current one; version 3 is kept as an earlier version. Apps read the restored value from then on.';

  const asked = dialogs.length;
  dismissNext = true;
  await button.click();
  await until('the dismissed confirmation', () => dialogs.length > asked);
  t.is(dialogs[asked], expected);
  t.is(restores().length, 0, 'nothing sent');
  t.is((await admin(ADMIN_API.vaultVersions, { query: { ...PROD, name: 'db.password' } })).version, 3, 'still at version 3');

  await button.click();
  await page.getByRole('status').filter({ hasText: 'Version 1 of db.password restored: it is version 4, the current one.' }).waitFor();
  t.is(dialogs.length, asked + 2);
  t.is(dialogs[asked + 1], expected);
  t.deepEqual(restores().map((s) => [s.method, s.status, new URL(s.url).searchParams.get('name')]), [['POST', 200, 'db.password']]);

  const listed = await admin(ADMIN_API.vaultVersions, { query: { ...PROD, name: 'db.password' } });
  t.is(listed.version, 4);
  t.deepEqual(listed.versions.map((v) => [v.version, v.current, v.kept]), [[4, true, true], [3, false, true], [2, false, true], [1, false, true]]);
  t.is((await admin(ADMIN_API.vaultGet, { query: { ...PROD, name: 'db.password' } })).value, PASSWORDS[0], "version 4's value is version 1's");
  await rowsBecome(page, 'four versions, 4 the current one', 'tr[data-version]', listed.versions.map((v) => [String(v.version), stamp(v.at), '(operator)', `${v.size} B`, v.current ? 'current' : 'kept', v.current ? '' : 'Restore']));
  await page.getByText('4 versions, newest first').waitFor();
  await rowsBecome(page, 'db.password at version 4 in the live list', 'tr[data-secret="db.password"]', [['db.password', '4', stamp(listed.versions[0].at), '(operator)', 'Versions']]);
  t.deepEqual(await valuesIn(page), [], 'no value in the page');
});

maybe('undelete: confirmed, api.key is live again at its version (in the view and in the admin API); screenshots at 1280 and 390 px; a name created again is refused (409) and the refusal is shown', async (t) => {
  t.timeout(60_000);
  explain(t);
  const asked = dialogs.length;
  await page.locator('tr[data-deleted="api.key"]').getByRole('button', { name: 'Undelete api.key' }).click();
  await page.getByRole('status').filter({ hasText: 'api.key is live again at version 2.' }).waitFor();
  t.is(dialogs[asked], 'Undelete api.key (workspace chat of alice, prod)? It is live again at version 2, as it was when deleted, and the apps granted the workspace read it again.');
  await page.locator('tr[data-deleted="api.key"]').waitFor({ state: 'detached' });
  const live = await admin(ADMIN_API.vaultList, { query: PROD });
  const back = live.find((s) => s.name === 'api.key');
  t.like(back, { name: 'api.key', version: 2 });
  await rowsBecome(page, 'api.key among the live secrets', 'tr[data-secret="api.key"]', [['api.key', '2', stamp(back!.updatedAt), '(operator)', 'Versions']]);
  t.deepEqual((await admin(ADMIN_API.vaultDeleted, { query: PROD })).map((d) => d.name), ['dup']);
  t.is((await admin(ADMIN_API.vaultGet, { query: { ...PROD, name: 'api.key' } })).value, API_KEYS[1], 'its value as it was');

  // The view as it stands (both lists, db.password's versions open), before a refusal is shown in it.
  await page.locator('tr[data-version="4"]').waitFor();
  const paths = await shoot(page, 'secrets');
  t.log(`screenshots: ${paths.join(', ')}`);

  // dup was deleted, then created again: the vault refuses to undelete over the live one.
  await page.locator('tr[data-deleted="dup"]').getByRole('button', { name: 'Undelete dup' }).click();
  const alert = page.getByRole('alert').filter({ hasText: 'dup' });
  await alert.waitFor();
  t.regex((await alert.textContent())!, /^secret "dup" exists again \(version 1, created .+ by \(operator\)\): delete it first to undelete the earlier one$/);
  t.is(dialogs.length, asked + 2, 'it was confirmed first');
  const refused = vaultRequests.sent.filter((s) => s.url.includes('/admin/v1/vault/secret/undelete') && new URL(s.url).searchParams.get('name') === 'dup');
  t.deepEqual(refused.map((s) => s.status), [409]);
  t.is(await page.locator('tr[data-deleted="dup"]').count(), 1, 'still deleted');
  t.deepEqual(await valuesIn(page), [], 'no value in the page');
});

maybe('the page never asked for a value and was never sent one', async (t) => {
  t.timeout(60_000);
  explain(t);
  // Only the routes that answer no value: never GET /admin/v1/vault/secret or /vault/secrets/:name
  // (`rekey`: how many values are under value keys, counts only).
  const asked = vaultRequests.sent.map((s) => `${s.method} ${new URL(s.url).pathname}`);
  t.deepEqual([...new Set(asked)].sort(), [
    'GET /admin/v1/vault/deleted',
    'GET /admin/v1/vault/rekey',
    'GET /admin/v1/vault/secrets',
    'GET /admin/v1/vault/versions',
    'POST /admin/v1/vault/secret/restore',
    'POST /admin/v1/vault/secret/undelete',
  ]);
  const bodies = await within('the bodies of the vault answers', Promise.all(vaultBodies));
  t.true(bodies.length >= 10, `${bodies.length} answers read`);
  t.deepEqual(ALL_VALUES.filter((v) => bodies.some((b) => b.includes(v))), [], 'no value in any answer the page was given');
});
