# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private module_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The update agents of an image-based host: read in one command, judged here, turned off the documented way.

Each OS ships an agent that updates and reboots the host on its own, outside every budget and window:

``zincati`` (Fedora CoreOS)
    ``zincati.service``, configured by TOML fragments in ``/usr/lib/zincati/config.d``,
    ``/run/zincati/config.d`` and ``/etc/zincati/config.d`` (``*.toml``; a fragment in a later directory
    replaces the one of the same name in an earlier one, and the fragments are merged in the
    lexicographic order of their names). ``[updates] enabled`` (true as shipped) and ``[updates]
    strategy``: ``immediate`` (as shipped: reboot as soon as an update is staged), ``periodic``
    (reboot within its maintenance windows) or ``fleet_lock`` (reboot when the FleetLock server at
    ``[updates.fleet_lock] base_url`` grants a slot). Zincati docs: usage/auto-updates.md,
    usage/updates-strategy.md, development/config.md. On a host booted from a container image,
    Zincati follows the ``com.coreos.stream`` label of the booted image (which an image built FROM
    Fedora CoreOS inherits) and rebases to the official image of that stream.
``bootc``
    ``bootc-fetch-apply-updates.timer`` runs ``bootc upgrade --apply``: fetch the tracked image and
    reboot into it when it moved (bootc docs: man/bootc-fetch-apply-updates.service.md; turned off with
    ``systemctl mask --now bootc-fetch-apply-updates.timer``).
``rpm-ostree``
    ``rpm-ostreed-automatic.timer`` with ``AutomaticUpdatePolicy`` in the ``[Daemon]`` section of
    ``/etc/rpm-ostreed.conf``: ``none`` (the default), ``check`` (only looks) or ``stage`` (stages the
    update, which the next reboot applies). rpm-ostree docs: automatic-updates.md, man rpm-ostreed.conf(5).

:data:`PROBE_SCRIPT` reads all three in one command; :func:`parse` and :func:`judge` decide on the controller.
"""

from __future__ import annotations

import re

from ansible_collections.fleetos.layering.plugins.module_utils._errors import CommandError

ZINCATI, BOOTC, RPM_OSTREE = "zincati", "bootc", "rpm-ostree"
AGENTS = (ZINCATI, BOOTC, RPM_OSTREE)
UNITS = {ZINCATI: "zincati.service", BOOTC: "bootc-fetch-apply-updates.timer", RPM_OSTREE: "rpm-ostreed-automatic.timer"}
ZINCATI_DIRS = ("/usr/lib/zincati/config.d", "/run/zincati/config.d", "/etc/zincati/config.d")
RPM_OSTREED_CONF = "/etc/rpm-ostreed.conf"
# What fleetos.layering.update_agents writes to turn Zincati's updates off; late in the merge order.
ZINCATI_DROP_IN = "/etc/zincati/config.d/90-fleetos-updates-disabled.toml"
ZINCATI_DISABLED = (b"# Written by fleetos.layering.update_agents: this host's updates are rolled out by the\n"
                    b"# fleetos.layering collection. Remove this file and restart zincati.service to re-enable them.\n"
                    b"[updates]\nenabled = false\n")
VARIABLE = "fleetos_update_agents"
POLICIES = ("disable", "keep")
# systemctl is-enabled states under which the unit starts at boot (or was started by hand: is-active).
_ENABLED = ("enabled", "enabled-runtime", "static", "alias", "indirect", "linked", "linked-runtime", "generated")
_ACTIVE = ("active", "activating", "reloading")

# $@: the units. One line per unit ("unit<TAB>name<TAB>is-enabled<TAB>is-active"), then each config file
# as "file<TAB>path<TAB>size in bytes" followed by exactly that many bytes.
PROBE_SCRIPT = r"""
for unit in "$@"; do
  if command -v systemctl >/dev/null 2>&1; then
    e=$(systemctl is-enabled -- "$unit" 2>/dev/null) || true
    a=$(systemctl is-active -- "$unit" 2>/dev/null) || true
  fi
  printf 'unit\t%s\t%s\t%s\n' "$unit" "${e:-not-found}" "${a:-inactive}"
done
for f in /usr/lib/zincati/config.d/*.toml /run/zincati/config.d/*.toml /etc/zincati/config.d/*.toml /etc/rpm-ostreed.conf; do
  [ -f "$f" ] || continue
  printf 'file\t%s\t%s\n' "$f" "$(wc -c < "$f")"
  cat -- "$f"
done
exit 0
"""


def probe_argv():
    """The one command :func:`probe` runs (for ``Host.prefetch``)."""
    return ["sh", "-c", PROBE_SCRIPT, "sh"] + [UNITS[name] for name in AGENTS]


def probe(host):
    """The raw state of the agents on ``host`` (a ``_host.Host``): ``{"units": {unit: (enabled, active)},
    "files": {path: bytes}}``, from one command."""
    argv = probe_argv()
    rc, out, err = host.run(argv, binary=True)
    if rc != 0:
        raise CommandError("Failed to read the update agents of the host: %s." % (
            (err or "").strip().splitlines()[-1] if (err or "").strip() else "exit status %d" % rc),
            cmd=argv[:2], rc=rc, stderr=err)
    return parse_probe(out)


def parse_probe(out):
    """What :data:`PROBE_SCRIPT` printed (bytes) -> ``{"units": ..., "files": ...}``."""
    units, files = {}, {}
    pos = 0
    while pos < len(out):
        end = out.find(b"\n", pos)
        if end < 0:
            break
        fields = out[pos:end].decode("utf-8", "replace").split("\t")
        pos = end + 1
        if fields[0] == "unit" and len(fields) == 4:
            units[fields[1]] = (fields[2].strip(), fields[3].strip())
        elif fields[0] == "file" and len(fields) == 3 and fields[2].strip().isdigit():
            size = int(fields[2])
            files[fields[1]] = out[pos:pos + size]
            pos += size
    return {"units": units, "files": files}


def toml_values(data):
    """``{(table, key): value}`` of the small TOML the agents' fragments use: tables, ``key = value`` with
    strings, booleans and integers. Anything else is skipped (it does not decide an update)."""
    values = {}
    table = ""
    for raw in data.decode("utf-8", "replace").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = re.fullmatch(r"\[\s*([A-Za-z0-9_.\-\s]+?)\s*\]\s*(#.*)?", line)
        if match:
            table = ".".join(part.strip() for part in match.group(1).split("."))
            continue
        match = re.fullmatch(r"([A-Za-z0-9_\-]+)\s*=\s*(.+?)\s*(#[^\"']*)?", line)
        if not match:
            continue
        text = match.group(2)
        if text in ("true", "false"):
            value = text == "true"
        elif re.fullmatch(r"[+-]?\d+", text):
            value = int(text)
        elif len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
            value = text[1:-1]
        else:
            continue
        values[(table, match.group(1))] = value
    return values


def zincati_config(files):
    """Zincati's merged configuration from the fragments in ``files`` (path -> bytes): ``(values, fragments)``,
    the fragments in the order they were merged (a later directory's fragment replaces the same name)."""
    chosen = {}
    for directory in ZINCATI_DIRS:
        for path in sorted(files):
            if path.startswith(directory + "/") and path.endswith(".toml") and "/" not in path[len(directory) + 1:]:
                chosen[path[len(directory) + 1:]] = path
    values = {}
    order = [chosen[name] for name in sorted(chosen)]
    for path in order:
        values.update(toml_values(files[path]))
    return values, order


def rpm_ostree_policy(files):
    """``AutomaticUpdatePolicy`` of the ``[Daemon]`` section of /etc/rpm-ostreed.conf (``none`` when unset)."""
    section = None
    policy = "none"
    for raw in (files.get(RPM_OSTREED_CONF) or b"").decode("utf-8", "replace").splitlines():
        line = raw.strip()
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
        elif section == "Daemon" and "=" in line and not line.startswith(("#", ";")):
            key, value = line.split("=", 1)
            if key.strip() == "AutomaticUpdatePolicy":
                policy = value.strip() or "none"
    return policy


def _unit(units, name):
    enabled, active = units.get(UNITS[name], ("not-found", "inactive"))
    return {"unit": UNITS[name], "enabled_state": enabled, "active_state": active,
            "installed": enabled != "not-found" or active in _ACTIVE,
            "masked": enabled.startswith("masked"),
            "on": not enabled.startswith("masked") and (enabled in _ENABLED or active in _ACTIVE)}


def judge(raw):
    """Each agent's state and what it would do -> ``{agent: record, "active": [...], "summary": "..."}``; a record
    has ``unit``, ``enabled_state``, ``active_state``, ``on``, ``would_update`` (it would replace the deployment on
    its own), ``reboots`` (it would reboot the host on its own), ``summary`` (one line) and the agent's own
    settings; ``active`` names the agents that would update the host (:func:`active`), ``summary`` is
    :func:`summary`."""
    units, files = raw.get("units") or {}, raw.get("files") or {}
    agents = {}

    record = _unit(units, ZINCATI)
    values, fragments = zincati_config(files)
    enabled = values.get(("updates", "enabled"), True)
    strategy = values.get(("updates", "strategy"), "immediate")
    record.update(updates_enabled=enabled is True, strategy=strategy, fragments=fragments,
                  fleet_lock_url=values.get(("updates.fleet_lock", "base_url")))
    record["would_update"] = record["on"] and record["updates_enabled"]
    record["reboots"] = record["would_update"]
    if not record["installed"]:
        record["summary"] = "not installed"
    elif not record["on"]:
        record["summary"] = "%s is %s" % (record["unit"], record["enabled_state"])
    elif not record["updates_enabled"]:
        record["summary"] = "on, updates disabled ([updates] enabled = false)"
    else:
        when = ("when the FleetLock server %s grants a slot" % record["fleet_lock_url"]
                if strategy == "fleet_lock" else "strategy %s" % strategy)
        record["summary"] = "on, updates enabled: updates and reboots the host on its own (%s)" % when
    agents[ZINCATI] = record

    record = _unit(units, BOOTC)
    record["would_update"] = record["reboots"] = record["on"]
    record["summary"] = ("not installed" if not record["installed"] else
                         "on: bootc upgrade --apply updates and reboots the host on its own" if record["on"]
                         else "%s is %s" % (record["unit"], record["enabled_state"]))
    agents[BOOTC] = record

    record = _unit(units, RPM_OSTREE)
    policy = rpm_ostree_policy(files)
    record["policy"] = policy
    record["would_update"] = record["on"] and policy == "stage"
    record["reboots"] = False
    if not record["installed"] and policy == "none":
        record["summary"] = "not installed"
    elif record["would_update"]:
        record["summary"] = "on, AutomaticUpdatePolicy=stage: stages updates that the next reboot applies"
    else:
        record["summary"] = "AutomaticUpdatePolicy=%s, %s is %s" % (policy, record["unit"], record["enabled_state"])
    agents[RPM_OSTREE] = record
    agents["active"] = active(agents)
    agents["summary"] = summary(agents)
    return agents


def read(host):
    """The update agents of ``host``, judged: see :func:`judge`."""
    return judge(probe(host))


def active(agents):
    """The names of the agents that would update the host on their own, in AGENTS order."""
    return [name for name in AGENTS if ((agents or {}).get(name) or {}).get("would_update")]


def summary(agents):
    """One line: each installed agent's summary, or ``none``."""
    parts = ["%s: %s" % (name, agents[name]["summary"]) for name in AGENTS
             if isinstance((agents or {}).get(name), dict) and agents[name].get("summary") != "not installed"]
    return "; ".join(parts) or "none installed"


def refusal(host, agents):
    """The sentence of a host the plan refuses to stage because an agent would undo the rollout, or None."""
    names = active(agents)
    if not names:
        return None
    described = ", ".join("%s (%s)" % (name, agents[name]["summary"]) for name in names)
    return ("the update agent %s of %s would replace the rolled-out image on its own: set %s: disable to turn it "
            "off (or keep to leave it on purpose)" % (described, host, VARIABLE))


def check_policy(value):
    """``fleetos_update_agents`` -> ``disable``, ``keep`` or None (unset); InvalidInputError naming the field."""
    from ansible_collections.fleetos.layering.plugins.module_utils._errors import InvalidInputError

    if value is None or value == "":
        return None
    if value not in POLICIES:
        raise InvalidInputError("%s %r is not one of %s" % (VARIABLE, value, ", ".join(POLICIES)), field=VARIABLE)
    return value


# Where the rpm-ostreed.conf edit keeps its lock, and the Zincati drop-in too (a lock beside the drop-in
# would be a file in Zincati's configuration directory).
LOCK = "/run/fleetos-update-agents.lock"


def _policy_none(data):
    """/etc/rpm-ostreed.conf (bytes) with ``AutomaticUpdatePolicy=none`` in its ``[Daemon]`` section, every
    other byte kept."""
    lines = data.decode("utf-8", "surrogateescape").splitlines(True)
    section = None
    for index, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            section = stripped[1:-1].strip()
        elif section == "Daemon" and "=" in stripped and not stripped.startswith(("#", ";")) \
                and stripped.split("=", 1)[0].strip() == "AutomaticUpdatePolicy":
            ending = line[len(line.rstrip("\r\n")):]
            lines[index] = "AutomaticUpdatePolicy=none" + ending
    return "".join(lines).encode("utf-8", "surrogateescape")


def _run(host, argv, what):
    rc, out, err = host.run(argv)
    if rc != 0:
        raise CommandError("Failed to %s: %s." % (what, (err or "").strip().splitlines()[-1].rstrip(".")
                                                  if (err or "").strip() else "exit status %d" % rc),
                           cmd=argv, rc=rc, stdout=out, stderr=err)


def disable(host, check_mode=False):
    """Turn off, the documented way, every agent of ``host`` that could update it on its own; -> the result:
    ``changed``, ``disabled`` (the agents changed), ``actions`` (one line each), ``update_agents`` (as read
    before), ``diff`` (the files and the units' state, before and after)."""
    raw = probe(host)
    agents = judge(raw)
    actions, disabled, diffs = [], [], []
    zincati = agents[ZINCATI]
    if zincati["installed"] and (zincati["updates_enabled"] or raw["files"].get(ZINCATI_DROP_IN) is not None):
        current = raw["files"].get(ZINCATI_DROP_IN)
        if current != ZINCATI_DISABLED:
            disabled.append(ZINCATI)
            restart = zincati["active_state"] in _ACTIVE
            actions.append("zincati: %s written ([updates] enabled = false)%s"
                           % (ZINCATI_DROP_IN, ", zincati.service restarted" if restart else ""))
            diffs.append({"before_header": ZINCATI_DROP_IN, "after_header": ZINCATI_DROP_IN,
                          "before": (current or b"").decode("utf-8", "replace"),
                          "after": ZINCATI_DISABLED.decode("utf-8")})
            if not check_mode:
                # Zincati reads its configuration as its own user: the directory stays readable.
                _run(host, ["mkdir", "-p", "-m", "0755", "--", ZINCATI_DIRS[-1]], "make %s" % ZINCATI_DIRS[-1])
                host.replace_file(ZINCATI_DROP_IN, ZINCATI_DISABLED, current, mode=0o644, lock=LOCK)
                if restart:
                    _run(host, ["systemctl", "restart", UNITS[ZINCATI]], "restart %s" % UNITS[ZINCATI])
    bootc = agents[BOOTC]
    if bootc["installed"] and not bootc["masked"]:
        disabled.append(BOOTC)
        actions.append("bootc: %s masked and stopped" % UNITS[BOOTC])
        diffs.append({"before_header": UNITS[BOOTC], "after_header": UNITS[BOOTC],
                      "before": "%s, %s\n" % (bootc["enabled_state"], bootc["active_state"]), "after": "masked, inactive\n"})
        if not check_mode:
            _run(host, ["systemctl", "mask", "--now", UNITS[BOOTC]], "mask %s" % UNITS[BOOTC])
    rpm = agents[RPM_OSTREE]
    if rpm["policy"] != "none":
        current = raw["files"][RPM_OSTREED_CONF]
        wanted = _policy_none(current)
        disabled.append(RPM_OSTREE)
        actions.append("rpm-ostree: AutomaticUpdatePolicy=none in %s, rpm-ostree reload" % RPM_OSTREED_CONF)
        diffs.append({"before_header": RPM_OSTREED_CONF, "after_header": RPM_OSTREED_CONF,
                      "before": current.decode("utf-8", "replace"), "after": wanted.decode("utf-8", "replace")})
        if not check_mode:
            if not host.replace_file(RPM_OSTREED_CONF, wanted, current, mode=0o644, lock=LOCK):
                raise CommandError("Failed to set AutomaticUpdatePolicy=none: %s changed while it was edited; "
                                   "run the task again." % RPM_OSTREED_CONF)
            _run(host, ["rpm-ostree", "reload"], "reload rpm-ostree's configuration")
    return {"changed": bool(disabled), "disabled": disabled, "actions": actions, "update_agents": agents,
            "diff": diffs}


# The options of fleetos.layering.os_update_agents.
ARGUMENT_SPEC = dict(
    state=dict(type="str", choices=["disabled"], default="disabled"),
)
