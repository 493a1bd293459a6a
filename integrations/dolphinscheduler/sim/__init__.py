"""A loopback DolphinScheduler (3.1, 3.2 or 3.3 profile) for tests and the demo.

`model.py` is the simulated master (instances, task rows, backfill chains, a hand-moved clock);
`actions.py` what it does with rerun, stop, pause, recover and force-success; `schedules.py` its cron
schedules; `views.py` renders its JSON the way each version does; `executors.py` checks starts and
instance actions as each version does; `api.py` serves the REST API.
"""

from xihe.integrations.dolphinscheduler.sim.api import DolphinSimulator, Fault
from xihe.integrations.dolphinscheduler.sim.model import (
    Scenario,
    SimDefinition,
    SimInstance,
    SimProject,
    SimTask,
)

__all__ = ["DolphinSimulator", "Fault", "Scenario", "SimDefinition", "SimInstance", "SimProject", "SimTask"]
