import { errorFromAnswer, readJson } from '../errors.js';
import type { PierApp } from './app.js';

export type SecretEnv = 'test' | 'dev' | 'staging' | 'prod';

export interface Secret {
  name: string;
  value: string;
  env: SecretEnv;
}

export interface VaultOptions {
  /** The vault's name: the manifest grants `secret.<vault>` (default `vault`). */
  vault?: string;
  /** Default env of every call (default `prod`). */
  env?: SecretEnv;
}

type Op = 'RetrieveSecret' | 'CreateSecret' | 'UpdateSecret' | 'DeleteSecret' | 'ListSecret';

/**
 * One workspace's secrets (CONTRACT.md section 5). The manifest must grant each op used, as
 * `<Op>?workspace=<workspace>`. Absent: NotFoundError; already there: ConflictError.
 */
export class VaultClient {
  private readonly vaultName: string;
  private readonly env: SecretEnv;

  constructor(
    private readonly app: PierApp,
    readonly workspace: string,
    options: VaultOptions = {},
  ) {
    this.vaultName = options.vault ?? 'vault';
    this.env = options.env ?? 'prod';
  }

  async get(name: string, env: SecretEnv = this.env): Promise<Secret> {
    return (await this.op('RetrieveSecret', { name, env })) as Secret;
  }

  async create(name: string, value: string, env: SecretEnv = this.env): Promise<void> {
    await this.op('CreateSecret', { name, value, env });
  }

  async update(name: string, value: string, env: SecretEnv = this.env): Promise<void> {
    await this.op('UpdateSecret', { name, value, env });
  }

  async delete(name: string, env: SecretEnv = this.env): Promise<void> {
    await this.op('DeleteSecret', { name, env });
  }

  async list(env: SecretEnv = this.env): Promise<Secret[]> {
    return (await this.op('ListSecret', { env })) as Secret[];
  }

  private async op(op: Op, body: Record<string, string>): Promise<unknown> {
    const grant = `${op}?workspace=${this.workspace}`;
    const group = `secret.${this.vaultName}`;
    const path = `/system-server/v1alpha1/secret/${encodeURIComponent(group)}/v1/${op}?workspace=${encodeURIComponent(this.workspace)}`;
    const res = await this.app.fetchWithToken({ dataType: 'secret', group, version: 'v1', ops: [grant] }, path, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const answer = (await readJson(res)) as { code?: unknown; data?: { data?: unknown } } | undefined;
    if (!res.ok) throw errorFromAnswer(res.status, answer, `vault ${op}`);
    // The vault is a v1 provider: Pier's envelope around the vault's own `{code: 200, data}`.
    if (answer?.code !== 0) throw errorFromAnswer(502, answer, `vault ${op}`);
    return answer.data?.data;
  }
}
