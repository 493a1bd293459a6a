"""Instance actions in the simulated master (a mixin of `DolphinModel`): rerun from failure, repeat
running, stop, pause, recover and a task's force-success.

As the reference and the source describe them (integrations/dolphinscheduler/CONTRACT.md):
- START_FAILURE_TASK_PROCESS: a command the master takes after the command delay (the state stays
  FAILURE until then); the run goes on from the first task without a successful row;
- STOP: READY_STOP now, STOP a few seconds later; a stopped backfill chain goes no further;
- PAUSE: READY_PAUSE at once; the running task finishes, no further task is submitted, and the
  workflow ends PAUSE (endTime set);
- RECOVER_SUSPENDED_PROCESS: a command the master takes after the command delay; runTimes+1, the
  run goes on from the first task that has not succeeded (a stopped run's killed tasks again);
- force-success of a failed or killed task row: FORCED_SUCCESS; the workflow becomes SUCCESS only
  when it ended FAILURE or STOP, every task of its DAG has a row and this was the only failed one
  (`forceProcessInstanceSuccessByTaskInstanceId`); otherwise it stays as it was, and a rerun
  (START_FAILURE_TASK_PROCESS) goes on with the downstream tasks.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from xihe.integrations.dolphinscheduler.sim.model import DolphinModel, SimInstance, SimTask

_DONE = frozenset({"SUCCESS", "FORCED_SUCCESS"})
_FAILED = frozenset({"FAILURE", "KILL", "NEED_FAULT_TOLERANCE"})


def next_task_index(inst: SimInstance) -> int:
    """The first task of the run's DAG without a current successful row (where a recovery starts)."""
    done = {t.index for t in inst.tasks if t.flag == "YES" and t.state in _DONE}
    return next((i for i in range(len(inst.dag_tasks)) if i not in done), len(inst.dag_tasks))


class Actions(DolphinModel):
    """What the master does with an instance action or a task's force-success."""

    def rerun_failed(self, inst: SimInstance) -> None:
        """START_FAILURE_TASK_PROCESS: asynchronous; the state stays FAILURE until the master takes it."""

        def consume(at: datetime) -> None:
            self._restart(inst, at, "START_FAILURE_TASK_PROCESS")
            for t in inst.tasks:
                if t.flag == "YES" and t.state in ("FAILURE", "KILL"):
                    t.flag = "NO"
            # from the first task without a successful row: a forced success lets its downstream run
            done = {
                t.index for t in inst.tasks if t.flag == "YES" and t.state in ("SUCCESS", "FORCED_SUCCESS")
            }
            inst.task_index = next((i for i in range(len(inst.dag_tasks)) if i not in done), inst.task_index)
            self._new_task_row(inst, inst.task_index, 0, at)
            self._schedule(inst, at + timedelta(seconds=1), "dispatch")

        self.consume_later(consume)

    def repeat_running(self, inst: SimInstance) -> None:
        """REPEAT_RUNNING: the whole workflow again, same id; old task rows get flag=NO."""

        def consume(at: datetime) -> None:
            self._restart(inst, at, "REPEAT_RUNNING")
            inst.start_time = at
            for t in inst.tasks:
                t.flag = "NO"
            inst.task_index = 0
            self._new_task_row(inst, 0, 0, at)
            self._schedule(inst, at + timedelta(seconds=1), "dispatch")

        self.consume_later(consume)

    def stop_instance(self, inst: SimInstance) -> None:
        """STOP: READY_STOP now, STOP a few seconds later; a stopped backfill chain goes no further."""
        inst.state, inst.command_type = "READY_STOP", "STOP"
        inst.remaining_dates = []
        self._schedule(inst, self.clock() + timedelta(seconds=inst.definition.scenario.stop_seconds), "stop")

    def pause_instance(self, inst: SimInstance) -> None:
        """PAUSE: READY_PAUSE now; PAUSE once the running task is done (`paused_after_task`)."""
        inst.state = "READY_PAUSE"
        inst.command_type = "PAUSE"
        if self._current(inst) is None:  # nothing running: pause at once
            self._finish(inst, "PAUSE", self.clock())

    def paused_after_task(self, inst: SimInstance, at: datetime) -> bool:
        """A task ended while the run was READY_PAUSE: the run ends PAUSE instead of going on."""
        if inst.state != "READY_PAUSE":
            return False
        inst.task_index = next_task_index(inst)
        self._finish(inst, "PAUSE", at)
        return True

    def recover_instance(self, inst: SimInstance) -> None:
        """RECOVER_SUSPENDED_PROCESS: the master takes the command later and goes on where it halted."""

        def consume(at: datetime) -> None:
            self._restart(inst, at, "RECOVER_SUSPENDED_PROCESS")
            for t in inst.tasks:
                if t.flag == "YES" and t.state in _FAILED:
                    t.flag = "NO"  # a stopped run's killed tasks run again
            inst.task_index = next_task_index(inst)
            if inst.task_index >= len(inst.dag_tasks):
                self._finish(inst, "SUCCESS", at)
                return
            self._new_task_row(inst, inst.task_index, 0, at)
            self._schedule(inst, at + timedelta(seconds=1), "dispatch")

        self.consume_later(consume)

    def force_task_success(self, inst: SimInstance, task: SimTask) -> None:
        """The task row becomes FORCED_SUCCESS; the run SUCCESS when nothing else is left undone."""
        now = self.clock()
        task.state, task.end_time = "FORCED_SUCCESS", now
        task.log.append(f"[INFO] {now:%Y-%m-%d %H:%M:%S} - task forced success")
        if inst.state not in ("FAILURE", "STOP"):
            return
        current = [t for t in inst.tasks if t.flag == "YES"]
        every_task_ran = {t.index for t in current} == set(range(len(inst.dag_tasks)))
        failed = [t for t in current if t.state in _FAILED]
        if every_task_ran and not failed:
            inst.state = "SUCCESS"
