import { ProviderClient } from './provider.js';
import type { SystemFetch } from './system-fetch.js';

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
 * One workspace's secrets (docs/protocol.md "Vault"). The manifest must grant each op used, as
 * `<Op>?workspace=<workspace>`. Absent: NotFoundError; already there: ConflictError.
 */
export class VaultClient {
  /** The vault is a built-in v1 provider (`secret`, `secret.<vault>`, `v1`): called as one. */
  private readonly provider: ProviderClient;
  private readonly env: SecretEnv;

  constructor(
    app: SystemFetch,
    readonly workspace: string,
    options: VaultOptions = {},
  ) {
    this.provider = new ProviderClient(app, { dataType: 'secret', group: `secret.${options.vault ?? 'vault'}`, version: 'v1' });
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
    // The v1 envelope holds the vault's own answer, `{code: 200, message, data}`: its `data` is the result.
    const answer = await this.provider.callJson<{ data?: unknown } | undefined>(op, body, { query: { workspace: this.workspace }, grant: `${op}?workspace=${this.workspace}` });
    return answer?.data;
  }
}
