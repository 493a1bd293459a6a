"""Prometheus metrics of one process, on a registry of its own (no global state)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest


class Metrics:
    """The counters and histograms `/metrics` exposes."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.messages = Counter("xihe_messages_total", "inbound messages", ["channel", "kind"], registry=r)
        self.tool_calls = Counter("xihe_tool_calls_total", "tool calls", ["tool", "outcome"], registry=r)
        self.gate = Counter("xihe_gate_decisions_total", "gate decisions", ["decision"], registry=r)
        self.alerts = Counter("xihe_alerts_total", "alert decisions", ["outcome"], registry=r)
        self.ds_polls = Counter("xihe_ds_poll_requests_total", "DolphinScheduler poll requests", registry=r)
        self.queue = Gauge("xihe_queue_depth", "rows waiting", ["queue"], registry=r)
        self.latency = Histogram("xihe_message_seconds", "time to answer a message", ["channel"], registry=r)
        self.wait = Histogram(
            "xihe_queue_wait_seconds", "time a message waited for a worker", ["channel", "lane"], registry=r
        )
        self.in_flight = Gauge(
            "xihe_conversations_in_flight", "conversations with a turn running", ["channel"], registry=r
        )
        self.model_latency = Histogram("xihe_model_seconds", "time of one model request", registry=r)
        self.model_tokens = Histogram(
            "xihe_model_tokens",
            "tokens per model request",
            ["kind"],
            buckets=(100, 300, 1000, 3000, 10000, 30000, 100000),
            registry=r,
        )
        self.ui_logins = Counter("xihe_ui_logins_total", "web UI login tries", ["outcome"], registry=r)
        self.job_runs = Counter("xihe_job_runs_total", "scheduler job runs", ["job", "outcome"], registry=r)

    def render(self) -> bytes:
        """The text exposition format."""
        return generate_latest(self.registry)
