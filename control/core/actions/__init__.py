"""Actions returned by ``ControlCore.step(now)``; a driver carries them out and decides nothing.

Every action is a frozen value (``control.core.values``) with a ``reason`` a person can read.
``StepPlan`` groups the actions of one step in the order the driver should apply them, and names
the phase each came from. By what they act on:

- ``work``: ``Dispatch`` (a batch of ``BatchItem``s with their ``InputBinding``s), ``MoveStep``,
  ``StepRetried``, ``StepPreempted``;
- ``runs``: ``Reject``, ``Preempt``, ``RunFinished``;
- ``fleet``: ``LoadModel``, ``EvictReplica``, ``DrainReplica``, ``ReplicaRoutable``,
  ``RolloutTransition``;
- ``canary``: ``CanaryTransition``;
- ``plan``: the ``Action`` union, ``PHASES``, ``StepPlan`` and its lazy ``PhaseView``.

Import them from here (``from control.core.actions import Dispatch``).
"""

from control.core.actions.canary import CanaryTransition as CanaryTransition
from control.core.actions.fleet import DrainReplica as DrainReplica
from control.core.actions.fleet import EvictReplica as EvictReplica
from control.core.actions.fleet import LoadModel as LoadModel
from control.core.actions.fleet import ReplicaRoutable as ReplicaRoutable
from control.core.actions.fleet import RolloutTransition as RolloutTransition
from control.core.actions.plan import PHASES as PHASES
from control.core.actions.plan import Action as Action
from control.core.actions.plan import PhaseView as PhaseView
from control.core.actions.plan import StepPlan as StepPlan
from control.core.actions.runs import Preempt as Preempt
from control.core.actions.runs import Reject as Reject
from control.core.actions.runs import RunFinished as RunFinished
from control.core.actions.work import BatchItem as BatchItem
from control.core.actions.work import Dispatch as Dispatch
from control.core.actions.work import InputBinding as InputBinding
from control.core.actions.work import MoveStep as MoveStep
from control.core.actions.work import StepPreempted as StepPreempted
from control.core.actions.work import StepRetried as StepRetried
