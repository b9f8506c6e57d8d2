# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The controller's side of the rollout lease (fleetos.layering.os_rollout_lease).

* :func:`owner_of_this_run` names the running rollout: its id and the controller
  process that runs it (host name, user, pid and the process's start time, so that a
  reused pid is not taken for the same process).
* :func:`takeover` decides whether a refused lease may be taken over: its controller
  process is provably gone (same controller, process no longer running), or the
  operator named the rollout (``fleetos_rollout_break_lease: <id>``), or asked to break
  any expired lease (``fleetos_rollout_break_lease: true``).
* :func:`lease_plan` folds the lease into the host's plan: a host another rollout holds
  is an error naming the holder and every other host stops before staging; a host that
  a killed rollout rebooted into this plan's target and never verified is planned
  ``verify``.
"""

from __future__ import annotations

import binascii
import getpass
import os
import socket
import time

from ansible.module_utils.parsing.convert_bool import boolean
from ansible_collections.fleetos.layering.plugins.module_utils._errors import one_line
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._lease import UNVERIFIED_PHASES, expired
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._plan import short_digest

BREAK_VARIABLE = "fleetos_rollout_break_lease"
_BOOLEAN_WORDS = ("true", "yes", "on", "false", "no", "off")


def process_start(pid):
    """The start time of process ``pid`` in clock ticks since boot (/proc), or None."""
    try:
        with open("/proc/%d/stat" % int(pid), "rb") as handle:
            stat = handle.read().decode("utf-8", "replace")
    except (OSError, ValueError, TypeError):
        return None
    # The command name (field 2) may hold spaces and parentheses: fields count from the last ')'.
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def owner_of_this_run(pid=None, now=None):
    """The rollout id and owner record of this run; ``pid`` defaults to the ansible-playbook process.

    Task templating runs in a worker process that the ansible-playbook process forked,
    so the parent is the process whose life is the rollout's.
    """
    pid = os.getppid() if pid is None else pid
    now = time.time() if now is None else now
    rollout = "%s-%s" % (time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now)), binascii.hexlify(os.urandom(3)).decode())
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return {"rollout": rollout, "started_at": now,
            "owner": {"controller": socket.gethostname(), "user": user, "pid": pid, "start": process_start(pid)}}


def owner_gone(owner, me):
    """True when ``owner`` was a process on this controller that no longer runs; else False.

    A process on another controller cannot be checked from here: False.
    """
    owner = owner if isinstance(owner, dict) else {}
    me = me if isinstance(me, dict) else {}
    if not owner.get("controller") or owner.get("controller") != me.get("controller"):
        return False
    if owner.get("pid") is None or owner.get("start") is None:
        return False
    return process_start(owner["pid"]) != owner.get("start")


def takeover(lease_result, me, break_lease=None, now=None):
    """The rollout id whose lease the refused ``lease_result`` may take over, or None.

    ``me`` is the owner record of this run; ``break_lease`` the value of
    fleetos_rollout_break_lease (a rollout id, or true for any expired lease).
    """
    holder = _refused_by(lease_result)
    if holder is None or holder.get("released"):
        # A released lease refused: the host changed after this run started; nothing to break.
        return None
    now = time.time() if now is None else now
    if owner_gone(holder.get("owner"), me):
        return holder["rollout"]
    if break_lease is None:
        return None
    if isinstance(break_lease, bool) or str(break_lease).strip().lower() in _BOOLEAN_WORDS:
        return holder["rollout"] if boolean(break_lease, strict=False) and expired(holder, now) else None
    return holder["rollout"] if str(break_lease).strip() == holder["rollout"] else None


def _refused_by(lease_result):
    """The holder's record when ``lease_result`` is a refusal, else None.

    A registered result says so by ``acquired`` false and a ``holder``, whatever
    ``failed`` says (the playbook registers it with ``failed_when: false``).
    """
    result = lease_result if isinstance(lease_result, dict) else {}
    holder = result.get("holder")
    if result.get("skipped") or result.get("acquired") or not isinstance(holder, dict) or not holder.get("rollout"):
        return None
    return holder


def _holder_sentence(holder):
    owner = holder.get("owner") if isinstance(holder.get("owner"), dict) else {}
    return "rollout %s (%s@%s, pid %s)" % (
        holder.get("rollout"), owner.get("user") or "?", owner.get("controller") or "?", owner.get("pid") or "?")


def refusals(results):
    """The hosts another rollout holds, by holder: {holder sentence: [hosts]}, from the
    mapping host -> lease result of every host of the play (computed once per play)."""
    refused = {}
    for host, other in sorted((results or {}).items()):
        if _refused_by(other) is not None:
            refused.setdefault(_holder_sentence(other["holder"]), []).append(host)
    return refused


def lease_plan(plan, lease_result, refused=None, now=None, before="staging"):
    """Fold the host's lease result into its ``plan``; -> a new plan.

    ``lease_result`` is the host's os_rollout_lease result (the takeover's when there
    was one), ``refused`` the play's :func:`refusals`; ``before`` names what a refusal stops
    the run before (``staging``, ``the rollback``).
    """
    plan = dict(plan) if isinstance(plan, dict) else {}
    result = lease_result if isinstance(lease_result, dict) else None
    now = time.time() if now is None else now
    refused = refused if isinstance(refused, dict) else {}
    if result is None or result.get("skipped"):
        pass
    elif not result.get("acquired"):
        holder = _refused_by(result)
        if holder is not None and holder.get("released"):
            reason = ("changed by %s after this rollout started: stopped before %s; run the rollout again"
                      % (_holder_sentence(holder), before))
        elif holder is not None:
            reason = ("leased by %s%s: stopped before %s; if that rollout is gone, rerun with %s=%s"
                      % (_holder_sentence(holder), ", expired" if expired(holder, now) else "", before,
                         BREAK_VARIABLE, holder.get("rollout")))
        else:
            reason = "taking the rollout lease failed: %s" % one_line(result.get("msg"), "failed")
        return _error(plan, reason)
    if refused and plan.get("action") != "error":
        holders = "; ".join("%s on %s" % (who, ", ".join(hosts[:5]) + (" and %d more" % (len(hosts) - 5)
                                                                       if len(hosts) > 5 else ""))
                            for who, hosts in sorted(refused.items()))
        return _error(plan, "stopped before %s: another rollout holds hosts of this one (%s)" % (before, holders))
    previous = (result or {}).get("previous")
    if isinstance(previous, dict) and not previous.get("released") and previous.get("phase") in UNVERIFIED_PHASES:
        plan["resumed_from"] = previous.get("rollout")
        if plan.get("action") == "unchanged" and previous.get("target_digest") == plan.get("digest"):
            plan.update(action="verify", up_to_date=False,
                        reason="booted %s in rollout %s, which ended before verifying it: verified on rerun"
                        % (short_digest(plan.get("digest")), previous.get("rollout")))
        else:
            # The killed rollout may still hold a FleetLock slot for the host.
            plan["release_slot"] = True
    return plan


def _error(plan, reason):
    plan.update(action="error", up_to_date=None, reason=reason)
    return plan
