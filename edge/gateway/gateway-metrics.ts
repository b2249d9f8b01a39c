import { Counter, Gauge, type Registry } from 'prom-client';

/** The gateway's metrics, on the process's registry (one module: what the gateway counts, in one place). */
export function gatewayMetrics(registry: Registry) {
  const registers = [registry];
  return {
    connections: new Gauge({ name: 'pier_ws_connections', help: 'Open WebSocket connections on this edge', registers }),
    messagesIn: new Counter({ name: 'pier_ws_messages_in_total', help: 'Frames received from clients', registers }),
    messagesOut: new Counter({ name: 'pier_ws_messages_out_total', help: 'Frames sent to clients', registers }),
    closes: new Counter({ name: 'pier_ws_closes_total', help: 'Connections closed, by code', labelNames: ['code'], registers }),
    refused: new Counter({ name: 'pier_ws_upgrades_refused_total', help: 'Upgrades refused, by status', labelNames: ['status'], registers }),
    recoveries: new Counter({ name: 'pier_ws_recoveries_total', help: 'Connections that asked for recovery, by outcome (recovered, or why not)', labelNames: ['outcome'], registers }),
    gapsSkipped: new Counter({ name: 'pier_ws_history_gaps_skipped_total', help: 'Live messages a gateway could neither wait for nor read from history, so skipped in order', registers }),
  };
}

export type GatewayMetrics = ReturnType<typeof gatewayMetrics>;
