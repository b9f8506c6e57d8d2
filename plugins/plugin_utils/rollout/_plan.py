# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The host plan of a rollout: what one host must do to reach its OS image, and why.

One pure function, :func:`host_plan`, decides for every playbook (plan, rollout,
rollback's report, adopt): which image a host gets (its MachineImage or pool default,
else the playbook's fallback image; for a MachineImage or pool that names a LayeredImage, the
composed digest the lock pins, ``fleetos_rollout_lock``), which digest a tag means (from the manifest-only
resolution ``fleetos.layering.os_image_pull state=resolved`` made once per image), which
transport stages it (exactly as asked: never weakened), and the action:

``skipped``
    no image, or the pool or the MachineImage is paused;
``unchanged``
    the booted deployment already has the target's content under the same transport,
    nothing else staged. Content is compared by digest: the deployment's pinned digest
    is the target digest (an OCI index digest for a multi-arch tag), or the per-platform
    manifest digest the host reports is the index's entry for the host's architecture;
``activate``
    the staged deployment is the target: only the reboot is missing;
``pin``
    the booted commit is the target image's ostree commit (known from an inspection of
    the image's configuration) but the origin names something else: the origin is
    rewritten in place, no pull, no reboot (as adoption does). Only under an unverified
    transport: a signed or remote one is staged, so that rpm-ostree verifies the image;
``stage``
    anything else: a rebase is staged;
``verify``
    set by the rollout lease (plugin_utils/rollout/_resume.py), never by :func:`host_plan`: a
    rollout that was killed rebooted the host into this target and never verified it;
    the host is verified and health-checked without a reboot;
``error``
    the image could not be resolved or is invalid, or another rollout holds the host;
    the reason says why.
"""

from __future__ import annotations

from ansible_collections.fleetos.layering.plugins.module_utils.host import _update_agents
from ansible_collections.fleetos.layering.plugins.module_utils.images import _image_ref

from ansible_collections.fleetos.layering.plugins.plugin_utils.host import _backends
from ansible_collections.fleetos.layering.plugins.module_utils._errors import InvalidInputError, one_line
from ansible_collections.fleetos.layering.plugins.module_utils.images._labels import imported_commit
from ansible_collections.fleetos.layering.plugins.module_utils.host._deployments import deployment_digest, has_digest
from ansible_collections.fleetos.layering.plugins.module_utils.images._skopeo import platform_digest
from ansible_collections.fleetos.layering.plugins.plugin_utils.images._layered import locked_image, lock_proof_problem

ACTIONS = ("skipped", "unchanged", "activate", "pin", "stage", "verify", "error")
DEFAULT_POOL = "default"
# The tool that manages a host (fleetos.layering.os_info's backend): it stages, activates and rolls back.
RPM_OSTREE = "rpm-ostree"
BOOTC = "bootc"
FALLBACK_VARIABLE = "fleetos_rollout_image"

# Keys of the origin file that name what a deployment tracks; pinning replaces them.
CONTAINER_KEY = "origin.container-image-reference"
REFSPEC_KEY = "origin.refspec"
CUSTOM_URL_KEY = "origin.custom-url"
CUSTOM_DESCRIPTION_KEY = "origin.custom-description"


def check_image(text, field=FALLBACK_VARIABLE):
    """Parse a plain image reference (no rpm-ostree transport) -> ImageRef, or raise naming ``field``."""
    try:
        ref = _image_ref.parse(text)
    except InvalidInputError as exc:
        raise InvalidInputError("%s is invalid: %s" % (field, exc.msg), field=field) from None
    if ref.transport is not None:
        raise InvalidInputError(
            "%s '%s' names an rpm-ostree transport: give a plain registry/repository[:tag|@sha256:...] "
            "and the transport separately" % (field, text), field=field)
    return ref


def _results_by_item(results):
    """``{image text: module result}`` from a registered loop's ``results`` (or such a mapping)."""
    if results is None:
        return {}
    if isinstance(results, dict):
        if "results" in results and isinstance(results["results"], list):
            results = results["results"]
        else:
            return results
    found = {}
    for result in results:
        if isinstance(result, dict) and isinstance(result.get("item"), str):
            found[result["item"]] = result
    return found


def _failure(result):
    msg = result.get("msg") if isinstance(result, dict) else None
    return one_line(msg, "no result")


def _transport_of(deployment):
    """The Transport a deployment's origin uses, or None (an ostree origin, an unknown transport)."""
    image = (deployment or {}).get("image")
    if not isinstance(image, dict) or not image.get("reference"):
        return None
    try:
        return _image_ref.parse(image["reference"]).transport
    except InvalidInputError:
        return None


def _same_transport(one, other):
    return one is not None and other is not None and (one.kind, one.remote) == (other.kind, other.remote)


def _pick_platform(resolution, architecture, image):
    """The per-platform digest of a resolved image for ``architecture`` (None when unknown).

    The entry is chosen as the modules choose it (``_skopeo.platform_digest``).
    """
    if architecture is None and resolution.get("index"):
        return None
    found = platform_digest({"index": bool(resolution.get("index")), "digest": resolution.get("digest"),
                             "manifests": resolution.get("manifests") or {}}, architecture)
    if found is None:
        raise InvalidInputError(
            "image %s is a multi-arch index without an entry for the host's architecture %s (it has %s)"
            % (image, architecture, ", ".join(sorted(resolution.get("manifests") or {})) or "none"))
    return found


def short_digest(value):
    """The first 12 hex digits of a digest, for a reason."""
    return (value or "none").split(":", 1)[-1][:12]


def host_plan(assignment, host, pool=None, fallback_image=None, fallback_transport=None, pool_paused=False,
              resolutions=None, status=None, inspections=None, labels=None, error=None,
              fallback_variable=FALLBACK_VARIABLE, lock=None, pins=None, update_agents=None, soft_reboot=None):
    """Decide what ``host`` must do; -> the plan record (see plugins/filter/rollout_plan.yml).

    ``assignment`` is the ``machine_image_result`` of the host (role
    fleetos.layering.machine_image), or None. ``resolutions`` and ``inspections`` are
    registered loop results of fleetos.layering.os_image_pull (``state=resolved`` over
    the wanted images; ``state=inspected`` over pinned per-platform images), or
    mappings of image text to such results; without ``resolutions`` the plan only
    names the image it wants (``wanted``) and decides nothing. ``status`` is the host's
    fleetos.layering.os_info (or rpm_ostree_info) result, or None when the host was not read.
    ``error`` records a host whose planning failed before (its message is the reason).
    ``lock`` is the lock ``fleetos_rollout_lock`` names, read once (``_layered.lock_record``), or
    None: an assignment that names a LayeredImage (``layered_image``) wants the composed image the
    lock pins, and the record's ``layered`` says which (base version, each layer's name and
    version, the composed digest); without a lock, or when the lock lacks it, the host is ``error``.
    ``pins`` maps the tags a verified canary batch resolved to their digests (``fleetos_last_rollout.images``),
    or is None: a wanted tag is then pinned to the canary's digest, and a tag the canary did not verify is
    ``error`` (see ``pin_to_canary``).
    ``update_agents`` is ``fleetos_update_agents`` (``disable``, ``keep`` or None): when the host's status holds
    its update agents (os_info ``update_agents``) and one would replace the deployment on its own, a host the
    plan would change is ``error`` with one sentence naming the agent and the variable, unless ``disable``
    (the rollout turns the agents off first) or ``keep`` (left on purpose).
    ``soft_reboot`` is the pool's ``fleetos_rollout_soft_reboot`` (None: never): the record's ``reboot`` says how
    an activation would reboot the host (``full``, ``soft``, ``none`` when a required soft reboot is not possible,
    or ``after the stage`` when its staged deployment decides), ``reboot_reason`` why not soft.
    """
    assignment = assignment if isinstance(assignment, dict) else {}
    pool = pool or DEFAULT_POOL
    plan = {
        "host": host, "pool": pool, "labels": labels if isinstance(labels, dict) else {},
        "source": assignment.get("source") or "pool", "name": assignment.get("name"),
        "defined_in": assignment.get("defined_in"), "pull_secret": assignment.get("pull_secret"),
        "paused": bool(assignment.get("paused")) or bool(pool_paused), "wanted": None, "image": None,
        "digest": None, "platform_digest": None, "index": False, "architecture": None, "transport": None,
        "transport_kind": None, "ostree_remote": None, "reference": None,
        "old_digest": None, "booted_digest": None, "booted_image": None, "booted_checksum": None,
        "staged_digest": None, "staged_image": None, "staged_checksum": None, "commit": None,
        "status_read": isinstance(status, dict), "backend": None, "up_to_date": None, "action": None, "reason": None,
        "origin_set": {}, "origin_remove": [], "layered": None,
        "update_agents": None, "update_agents_policy": None, "reboot": None, "reboot_reason": None,
    }
    if error is not None:
        plan.update(source="error", action="error", paused=False,
                    reason=one_line(error, "planning failed"))
        return plan
    if isinstance(status, dict):
        booted, staged = status.get("booted"), status.get("staged")
        plan["architecture"] = status.get("architecture")
        plan["backend"] = status.get("backend") or RPM_OSTREE
        for key, deployment in (("booted", booted), ("staged", staged)):
            image = (deployment or {}).get("image") or {}
            plan["%s_image" % key] = image.get("reference") or (deployment or {}).get("origin")
            plan["%s_checksum" % key] = (deployment or {}).get("checksum")
            plan["%s_digest" % key] = image.get("digest")
        plan["old_digest"] = plan["booted_digest"]
    else:
        booted = staged = status = None

    wanted = assignment.get("image")
    reason = assignment.get("reason") or ""
    transport_text = assignment.get("transport")
    if assignment.get("layered_image"):
        try:
            plan["layered"] = locked_image(lock, assignment["layered_image"], _layered_field(assignment))
        except InvalidInputError as exc:
            plan.update(action="error", reason=exc.msg)
            return plan
        wanted = plan["layered"]["image"]
        reason = "%s; LayeredImage '%s' (%s) from the lock %s" % (
            reason, plan["layered"]["name"], plan["layered"]["summary"], plan["layered"]["lock"])
    if not wanted and fallback_image and not assignment.get("paused"):
        wanted, transport_text = fallback_image, fallback_transport
        plan["source"] = fallback_variable
        reason = "%s %s" % (fallback_variable, fallback_image)
    plan["wanted"] = wanted
    if not wanted:
        plan["action"] = "skipped"
        plan["reason"] = reason or "no image assigned: no MachineImage, pool default or %s" % fallback_variable
        return plan
    try:
        if pins is not None:
            wanted, reason = pin_to_canary(wanted, reason, pins)
            plan["wanted"] = wanted
        _decide(plan, wanted, transport_text, reason, resolutions, _results_by_item(inspections),
                booted, staged, status)
        _check_lock_proof(plan, wanted, resolutions)
    except InvalidInputError as exc:
        plan["action"] = "error"
        plan["reason"] = exc.msg
    if pool_paused or assignment.get("paused"):
        # A paused host keeps the image it would get in the plan, and is left alone.
        plan["action"] = "skipped"
        plan["reason"] = ("pool %s is paused (fleetos_pool_paused)" % pool if pool_paused
                          else "MachineImage is paused: %s" % reason)
    _check_update_agents(plan, host, status, update_agents)
    _plan_reboot(plan, staged, soft_reboot)
    return plan


AFTER_THE_STAGE = "after the stage"


def _plan_reboot(plan, staged, setting):
    """How an activation would reboot the host (``reboot``, ``reboot_reason``), for a host to stage or activate."""
    if plan["action"] not in ("stage", "activate"):
        return
    setting = setting or "never"
    if setting not in _backends.SOFT_REBOOT:
        plan.update(action="error", reason="fleetos_rollout_soft_reboot is %r: it must be one of %s."
                    % (setting, ", ".join(_backends.SOFT_REBOOT)))
        return
    if setting != "never" and plan["backend"] is None:
        # Not read: the tool and the deployment it will stage are not known yet.
        plan.update(reboot=AFTER_THE_STAGE, reboot_reason="the host was not read")
        return
    backend = _backends.backend(plan["backend"] or RPM_OSTREE)
    if setting != "never" and backend.no_soft_reboot is None and plan["action"] == "stage":
        plan.update(reboot=AFTER_THE_STAGE, reboot_reason="decided from the staged deployment (%s's "
                    "softRebootCapable)" % backend.name)
        return
    kind, why = backend.soft_reboot(setting, staged)
    if kind != "soft" and setting == "required":
        plan.update(reboot="none", reboot_reason="soft reboot required, and %s: not activated" % why)
    else:
        plan.update(reboot=kind, reboot_reason=why)


def _check_update_agents(plan, host, status, policy):
    """Record the host's update agents (when read) and refuse a change that an agent would undo."""
    agents = (status or {}).get("update_agents") if isinstance(status, dict) else None
    policy = _update_agents.check_policy(policy)
    if not isinstance(agents, dict):
        return
    active = _update_agents.active(agents)
    plan["update_agents_policy"] = policy
    # disable: the rollout turns them off on every host it takes on, changed or not (an agent would undo an
    # unchanged host's image as well).
    plan["update_agents"] = {"active": active, "summary": _update_agents.summary(agents),
                             "disable": bool(active) and policy == "disable" and plan["action"] not in ("skipped", "error")}
    refusal = _update_agents.refusal(host, agents)
    if refusal and policy is None and plan["action"] in ("stage", "activate", "pin"):
        plan.update(action="error", reason=refusal)


def pin_to_canary(wanted, reason, pins):
    """A run after a verified canary batch rolls out what the canary verified: -> ``(wanted, reason)``.

    ``pins`` maps each tag the canary run resolved to the digest it verified (``fleetos_last_rollout.images``,
    handed on by an AWX workflow). A tag among them is pinned to that digest (resolving it again could give
    another image, pushed since); another tag is refused; a digest is kept."""
    try:
        ref = _image_ref.parse(wanted)
    except InvalidInputError:
        return wanted, reason  # _decide names the bad reference with its field
    if ref.digest is not None:
        return wanted, reason
    if wanted not in pins:
        raise InvalidInputError(
            "image %s is a tag the canary run did not verify (fleetos_last_rollout pins %s): give the image by digest"
            % (wanted, ", ".join(sorted(pins)) or "no tag"))
    # The tag is dropped: containers-image takes no reference with both a tag and a digest.
    return ref.with_digest(pins[wanted]).image, "%s; %s pinned to the digest the canary run verified" % (
        reason, wanted)


def _check_lock_proof(plan, wanted, resolutions):
    """A LayeredImage's image must be what the lock says was composed: its manifest's ``fleetos.io/inputs``
    (read by the plan's one resolution of the image) is the lock's ``inputs``. InvalidInputError otherwise."""
    if not plan.get("layered") or resolutions is None:
        return
    resolution = _results_by_item(resolutions).get(wanted)
    if resolution is None or resolution.get("failed"):
        return
    problem = lock_proof_problem(plan["layered"], resolution.get("annotations"))
    if problem:
        raise InvalidInputError(problem)


def _layered_field(assignment):
    """How a plan error names the field that asked for a LayeredImage."""
    if assignment.get("name"):
        return "spec.layeredImage of MachineImage '%s' (%s)" % (assignment["name"], assignment.get("defined_in"))
    return "fleetos_pool_layered_image"


def _decide(plan, wanted, transport_text, reason, resolutions, inspections, booted, staged, status):
    field = "spec.image of MachineImage '%s'" % plan["name"] if plan["name"] else (
        "fleetos_pool_image" if plan["source"] == "pool" else plan["source"])
    ref = check_image(wanted, field)
    transport = _image_ref.parse_transport(transport_text, field="transport")
    plan.update(transport=transport.text, transport_kind=transport.kind, ostree_remote=transport.remote)
    if plan["backend"] == BOOTC and transport.kind == "remote":
        raise InvalidInputError(
            "transport %s cannot be used on a bootc host: bootc switch verifies images only with the containers "
            "policy (ostree-image-signed)" % transport.text)
    digest = ref.digest
    if resolutions is None:
        plan["reason"] = reason
        if digest is not None:
            pinned = ref.with_digest(digest)
            plan.update(image=pinned.image, digest=digest, reference=_image_ref.reference(pinned.image, transport.text))
        return plan
    resolution = _results_by_item(resolutions).get(wanted)
    if resolution is not None and (resolution.get("failed") or not resolution.get("digest")):
        if digest is None:
            raise InvalidInputError("resolving %s failed: %s" % (wanted, _failure(resolution)))
        # A pinned digest needs no resolution; only its index entries stay unknown, and the
        # stage meets the registry's state for itself.
        resolution = None
    if resolution is not None:
        digest = resolution["digest"]
        if ref.digest is not None and ref.digest != digest:
            raise InvalidInputError("image %s resolved to %s, not to the digest it names" % (wanted, digest))
        plan["index"] = bool(resolution.get("index"))
    if digest is None:
        raise InvalidInputError("the tag %s was not resolved to a digest: the plan resolves tags once, "
                                "with fleetos.layering.os_image_pull state=resolved" % wanted)
    pinned = ref.with_digest(digest)
    plan.update(image=pinned.image, digest=digest,
                reference=_image_ref.reference(pinned.image, transport.text))
    platform = _pick_platform(resolution, plan["architecture"], wanted) if resolution else digest
    plan["platform_digest"] = platform
    if status is None:
        plan["reason"] = reason
        return plan

    on_booted = (has_digest(booted, digest) or has_digest(booted, platform)) and _same_transport(_transport_of(booted), transport)
    on_staged = (has_digest(staged, digest) or has_digest(staged, platform)) and _same_transport(_transport_of(staged), transport)
    inspection = inspections.get(_platform_image(pinned, platform))
    if inspection is not None and not inspection.get("failed"):
        # Derived layers (after ostree.final-diffid): the host imports a merge commit, not the label's.
        plan["commit"] = imported_commit(inspection.get("labels") or {}, inspection.get("diff_ids"))
    via = "" if plan["source"] == FALLBACK_VARIABLE else " (%s)" % reason
    if on_booted and staged is None:
        plan.update(action="unchanged", up_to_date=True, reason="booted on %s%s" % (short_digest(platform or digest), via))
    elif on_staged:
        plan.update(action="activate", up_to_date=False,
                    reason="staged on %s, not booted yet%s" % (short_digest(digest), via))
    elif (plan["commit"] is not None and booted is not None and staged is None and not transport.verified
          and booted.get("checksum") == plan["commit"]
          # bootc tracks an image only on a commit it imported from one: not on a disk image's commit.
          and (plan["backend"] != BOOTC or booted.get("image") is not None)):
        # Only under an unverified transport: a signed or remote transport is earned by a
        # verified pull, never written over content that was not verified.
        plan.update(action="pin", up_to_date=True,
                    origin_set={CONTAINER_KEY: plan["reference"]},
                    origin_remove=[REFSPEC_KEY, CUSTOM_URL_KEY, CUSTOM_DESCRIPTION_KEY],
                    reason="the booted commit %s is the image's commit: the origin %s becomes %s, no pull, no reboot"
                    % (short_digest(plan["commit"]), plan["booted_image"], plan["reference"]))
    else:
        plan.update(action="stage", up_to_date=False, reason=_stage_reason(booted, staged, digest, transport, via))
    return plan


def _stage_reason(booted, staged, digest, transport, via):
    booted_transport = _transport_of(booted)
    if booted is not None and booted_transport is not None and not _same_transport(booted_transport, transport):
        return "booted under %s, the target asks %s%s" % (booted_transport.text, transport.text, via)
    if staged is not None:
        return "a staged deployment (%s) is not %s%s" % (
            short_digest(((staged.get("image") or {}).get("digest")) or staged.get("checksum")), short_digest(digest), via)
    return "booted on %s, the target is %s%s" % (
        short_digest(((booted or {}).get("image") or {}).get("digest") or (booted or {}).get("checksum")), short_digest(digest), via)


def _platform_image(pinned, platform):
    """The image to inspect for the host's platform: ``name@<per-platform digest>``."""
    return "%s@%s" % (pinned.name, platform or pinned.digest)


def images_to_inspect(plans):
    """Pinned per-platform images worth an inspection: hosts to stage whose booted commit might match."""
    found = set()
    for plan in plans or []:
        if isinstance(plan, dict) and plan.get("action") == "stage" and plan.get("booted_checksum") \
                and plan.get("staged_image") is None and plan.get("image") and plan.get("transport_kind") == "registry":
            ref = _image_ref.parse(plan["image"])
            found.add(_platform_image(ref, plan.get("platform_digest")))
    return sorted(found)


def rollback_host_plan(status, host, pool=None, rollback_from=None):
    """What rolling ``host`` back takes: ``activate`` (boot the previous deployment) or ``unchanged``.

    ``status`` is the host's fleetos.layering.os_info result (rpm-ostree: after any staged
    deployment was cancelled; bootc discards it when it rolls back). ``rollback_from``: only
    a host booted on this digest is rolled back, so that a rerun changes nothing.
    """
    if not isinstance(status, dict):
        raise InvalidInputError("rollback_plan needs the host's os_info result, a mapping")
    if rollback_from is not None and not _image_ref.is_digest(rollback_from):
        raise InvalidInputError("fleetos_rollback_from %r is not a digest: expected %s"
                                % (rollback_from, _image_ref.DIGEST_FORM), field="fleetos_rollback_from")
    booted, previous_deployment = status.get("booted"), status.get("rollback")
    booted_digest, previous = deployment_digest(booted), deployment_digest(previous_deployment)
    wanted = previous is not None and previous != booted_digest and (
        rollback_from is None or booted_digest == rollback_from)
    if wanted:
        reason = "back to the previous deployment %s" % previous
    elif previous is None or previous == booted_digest:
        reason = "no previous deployment of another image"
    else:
        reason = "not booted on %s" % rollback_from
    return {
        "host": host, "pool": pool or DEFAULT_POOL, "action": "activate" if wanted else "unchanged",
        "image": previous_deployment["image"].get("reference") if wanted else None,
        "digest": previous if wanted else booted_digest, "transport": None, "old_digest": booted_digest,
        "booted_digest": booted_digest, "staged_digest": None, "staged_checksum": None, "reason": reason,
        "backend": status.get("backend") or RPM_OSTREE,
    }


def activation(plan, stage_result=None):
    """Whether the host is to be activated after the stage, how, and the checksum of its staged deployment.

    A host planned ``activate`` has the target staged already (the plan read its checksum);
    a host planned ``stage`` is activated when its stage left the target in a staged
    deployment (``os_stage_result``: ``staged_checksum`` set), whether or not an ordinary
    reboot would apply it (bootc's download-only deployment has ``reboot_required`` false,
    and the activation applies it); a host planned ``verify`` (a killed rollout rebooted it
    into the target) is verified without a reboot, before any other host (``order`` 0);
    any other host is not activated.
    """
    plan = plan if isinstance(plan, dict) else {}
    stage_result = stage_result if isinstance(stage_result, dict) else {}
    if plan.get("action") == "verify":
        return {"activate": True, "mode": "verify", "order": 0, "staged_checksum": None}
    if plan.get("action") == "activate":
        return {"activate": True, "mode": "finalize", "order": 1, "staged_checksum": plan.get("staged_checksum")}
    if plan.get("action") == "stage" and stage_result.get("status") == "staged" \
            and stage_result.get("staged_checksum") not in (None, ""):
        return {"activate": True, "mode": "finalize", "order": 1, "staged_checksum": stage_result.get("staged_checksum")}
    return {"activate": False, "mode": "finalize", "order": 1, "staged_checksum": None}
