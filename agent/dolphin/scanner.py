"""The failed-run scan of one bot process: the `alerts_scan` job's client, project codes and counters."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from prometheus_client import Counter as PromCounter

from xihe.agent.alert_event import AlertEvent
from xihe.agent.dolphin.scan import ScanPolicy, ScanResult, Target, scan_once
from xihe.agent.dolphin.scan_known import known_from_watches
from xihe.agent.dolphin.scan_marks import ScanMarks
from xihe.agent.errors import DolphinError
from xihe.config.alerts import Scan
from xihe.config.workflows import WorkflowsConfig
from xihe.integrations.dolphinscheduler.client import DolphinClient
from xihe.integrations.dolphinscheduler.factory import client_from_config

if TYPE_CHECKING:
    from xihe.agent.deps import Deps
    from xihe.tools.dolphin.service import DolphinService

log = logging.getLogger("xihe.alerts.scan")


class Scanner:
    """The scan of one bot process: its own DS client (requests counted), project codes, counters.

    The DolphinScheduler feature keeps one (its `Installed.state`) when alerts.yaml's `scan.enabled`;
    the `alerts_scan` job calls `run`.
    """

    def __init__(self, deps: Deps, cfg: Scan, workflows: WorkflowsConfig) -> None:
        self.deps = deps
        self.cfg = cfg
        self.workflows = workflows
        self.marks = ScanMarks(deps.engine, deps.holder)
        registry = deps.metrics.registry
        self.requests = PromCounter(
            "xihe_ds_scan_requests_total",
            "DolphinScheduler requests of the failed-run scan",
            registry=registry,
        )
        self.outcomes = PromCounter(
            "xihe_ds_scan_instances_total",
            "failed runs the scan looked at, by outcome",
            ["outcome"],
            registry=registry,
        )
        self._client: DolphinClient | None = None
        self._codes: dict[str, int] = {}  # project name → code (codes never change)

    def client(self, ds: DolphinService) -> DolphinClient:
        """A client of its own, so every request it sends is counted as a scan request."""
        if self._client is None:
            self._client = client_from_config(ds.config, count_request=self.requests.inc)
        return self._client

    def targets(self, ds: DolphinService, client: DolphinClient, result: ScanResult) -> list[Target]:
        """The configured projects with their codes (catalog, else asked once) and workflow names."""
        catalog = ds.catalog.entries()
        for e in catalog:
            self._codes.setdefault(e.project, e.project_code)
        out = []
        for name in self.cfg.projects:
            if name not in self._codes:
                try:
                    self._codes[name] = client.project_code(name)
                except DolphinError as exc:
                    result.errors.append(f"project {name}: {exc}")
                    continue
            code = self._codes[name]
            out.append(
                Target(
                    name,
                    code,
                    {e.code: e.name for e in catalog if e.project_code == code},
                    {w.name: w.environment for w in self.workflows.workflows if w.project == name},
                )
            )
        return out

    def run(self, ds: DolphinService, feed: Callable[[list[AlertEvent]], Any], now: datetime) -> ScanResult:
        """One scan at `now`; DolphinScheduler errors end up in `result.errors`, never raised."""
        policy = ScanPolicy.from_config(self.cfg, ds.policy.log_tail_lines)
        client = self.client(ds)
        result = ScanResult()
        targets = self.targets(ds, client, result)
        known = known_from_watches(self.deps.engine, now - policy.lookback - policy.max_run)
        scanned = scan_once(client, targets, known, self.marks, feed, now, policy)
        result.events, result.reported = scanned.events, scanned.reported
        result.skipped.update(scanned.skipped)
        result.errors.extend(scanned.errors)
        if result.reported:
            self.outcomes.labels("reported").inc(len(result.reported))
        for why, n in result.skipped.items():
            self.outcomes.labels(why).inc(n)
        if result.errors:
            self.outcomes.labels("error").inc(len(result.errors))
        for error in result.errors:
            log.warning("failed-run scan: %s", error)
        return result
