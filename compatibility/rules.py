"""The stable rule ids (like lint codes): one per kind of detected change, with its class (docs/plan.md)."""

from __future__ import annotations

import dataclasses
from typing import Literal

from compatibility.classes import BREAKING, DATA_MIGRATION, REQUIRES_RESTART, REVIEW, SAFE, SECURITY_BOUNDARY

__all__ = ["PLATFORM_RULE_BY_CLASS", "RULES", "Rule", "SoftDestructive"]

# When a soft change still takes something away (spec §3.8: it applies, with a SoftDestructiveChange event):
# always, when the value decreases (replicas, a need's size), or when a setting is removed.
SoftDestructive = Literal["always", "decrease", "removal"]


@dataclasses.dataclass(frozen=True)
class Rule:
    """A kind of change: its id (never reused), its type slug (MigrationPlan changes[].type) and class."""

    id: str
    type: str
    classification: str
    summary: str
    soft_destructive: SoftDestructive | None = None


_ALL = [
    # Availability / data-loss axis (spec §3.8).
    Rule("AR-DM001", "need-removed", DATA_MIGRATION, "a needs.* entry is removed"),
    Rule("AR-DM002", "application-renamed", DATA_MIGRATION, "metadata.name changes"),
    Rule("AR-DM003", "need-major-version", DATA_MIGRATION, "a need's major version changes"),
    Rule("AR-RR001", "public-hostname-changed", REQUIRES_RESTART,
         "the hostname of a public app changes or is removed"),
    Rule("AR-RR002", "public-reachability-removed", REQUIRES_RESTART,
         "expose.network goes from public to internal/vpn (or expose is removed)"),
    Rule("AR-RR003", "scale-to-zero", REQUIRES_RESTART, "replicas goes from N (or autoscaled) to 0"),
    Rule("AR-RR004", "env-reference-removed", REQUIRES_RESTART,
         "an env value that is a claim or secret reference is removed"),
    Rule("AR-RR005", "env-reference-rewired", REQUIRES_RESTART,
         "an env reference is replaced by a different claim reference"),
    Rule("AR-RR006", "readiness-removed", REQUIRES_RESTART,
         "the readiness probe goes away on an app that is exposed and running (health: false)"),
    # Security axis (ADR 0052).
    Rule("AR-SB001", "env-secret-added", SECURITY_BOUNDARY, "an env secret reference is added"),
    Rule("AR-SB002", "env-reference-downgraded", SECURITY_BOUNDARY,
         "an env reference is replaced by a literal"),
    Rule("AR-SB003", "env-secret-retargeted", SECURITY_BOUNDARY,
         "an env secret reference points at a different secret or key"),
    Rule("AR-SB004", "network-escalated", SECURITY_BOUNDARY, "expose.network becomes public"),
    Rule("AR-SB005", "public-hostname-added", SECURITY_BOUNDARY,
         "a hostname is set on a public app that used the default one"),
    Rule("AR-SB006", "public-port-retargeted", SECURITY_BOUNDARY, "expose.port changes on a public app"),
    Rule("AR-SB007", "image-resolve-relaxed", SECURITY_BOUNDARY,
         "imagePolicy.resolve goes from off to digest on an image that is not digest-pinned"),
    Rule("AR-SB008", "image-repository-changed", SECURITY_BOUNDARY, "the image repository (path) changes"),
    # Beyond the spec (issue 24): what widens where the workload's data may go, or who may see it run.
    Rule("AR-SB009", "egress-opened-to-world", SECURITY_BOUNDARY,
         "connects.egress.external goes from a list of destinations to none: the whole internet"),
    Rule("AR-SB010", "egress-widened", SECURITY_BOUNDARY,
         "a destination (host, cidr, port or protocol) is added to connects.egress.external"),
    Rule("AR-SB011", "confidential-removed", SECURITY_BOUNDARY, "confidential goes from true to false or away"),
    # Review (issue 33): auto-applied like soft, but listed for review like a gated addition, so that a new claim (a
    # database, a bucket: what holds the app's data from now on) is looked at in the pull request. It was AR-S001
    # (safe) until then; that id is retired, never reused.
    Rule("AR-RV001", "need-added", REVIEW, "a needs.* entry is added: a new claim"),
    # Soft: auto-applied, listed so that nothing hides behind a benign primary.
    Rule("AR-S002", "need-size-changed", SAFE, "a need's size changes", "decrease"),
    Rule("AR-S003", "need-settings-changed", SAFE,
         "a need's selector, minor version, streams, buckets or mountPath change", "removal"),
    Rule("AR-S004", "env-added", SAFE, "an env literal or claim reference is added"),
    Rule("AR-S005", "env-literal-removed", SAFE, "an env literal is removed", "always"),
    Rule("AR-S006", "env-literal-changed", SAFE, "an env literal changes or becomes a claim reference"),
    Rule("AR-S007", "image-tag-changed", SAFE, "the image tag or digest changes on the same repository"),
    Rule("AR-S008", "replicas-changed", SAFE, "replicas changes and does not go to zero", "decrease"),
    Rule("AR-S009", "expose-changed", SAFE, "an expose edit that removes no public reachability", "removal"),
    Rule("AR-S010", "image-policy-changed", SAFE,
         "imagePolicy hardening (digest -> off), interval, or resolve on a digest-pinned image"),
    Rule("AR-S011", "capacity-changed", SAFE, "resources, budget or autoscale change"),
    Rule("AR-S012", "egress-changed", SAFE,
         "connects.egress narrows (a destination removed, or a list where the whole internet was open)"),
    Rule("AR-S013", "runtime-changed", SAFE, "confidential turned on, network.egressIP, command or args change"),
    Rule("AR-S014", "readiness-weakened", SAFE,
         "readiness checks less (HTTP -> TCP, a higher failureThreshold, periodSeconds or timeoutSeconds), or goes "
         "away where no traffic reaches the app", "always"),
    Rule("AR-S015", "health-changed", SAFE,
         "any other health edit: readiness added or tightened, its path or port, initialDelaySeconds, liveness, "
         "startup, progressDeadlineSeconds", "removal"),
    # Platform scope: the class comes from the stack's compatibility metadata (§3.11).
    Rule("AR-PS000", "platform-component-safe", SAFE, "a platform component change classified safe"),
    Rule("AR-PS001", "platform-component-restart", REQUIRES_RESTART,
         "a platform component change classified requires-restart"),
    Rule("AR-PS002", "platform-component-data-migration", DATA_MIGRATION,
         "a platform component change classified data-migration"),
    Rule("AR-PS003", "platform-component-breaking", BREAKING,
         "a platform component change classified breaking"),
    # Credential scope (spec §3.12): a SourceCredential's coverage against what matches it (lifecycle.credentials.gate).
    Rule("AR-SC000", "credential-coverage-changed", SAFE,
         "coverage widened, or an entry (a prefix, host, namespace or project) removed that no Application matches"),
    Rule("AR-SC001", "credential-repository-uncovered", BREAKING,
         "a repository an Argo CD Application syncs is no longer covered (a prefix removed or narrowed, the git "
         "half removed)"),
    Rule("AR-SC002", "credential-image-uncovered", BREAKING,
         "an image an Application runs is no longer covered (a host removed or narrowed, the registry half removed)"),
    Rule("AR-SC003", "credential-deleted", BREAKING, "the SourceCredential is deleted while an Application matches it"),
    Rule("AR-SC004", "credential-namespace-uncovered", BREAKING,
         "an Application runs an image under the registry half's hosts in a namespace its scope no longer lists "
         "(spec.registry.namespaces narrowed, or set where it was absent)"),
    Rule("AR-SC005", "credential-project-uncovered", BREAKING,
         "an Argo CD Application syncs a repository under the git half's prefixes in a project its scope no longer "
         "lists (spec.git.projects narrowed, or set where it was absent)"),
]

RULES: dict[str, Rule] = {rule.id: rule for rule in _ALL}
PLATFORM_RULE_BY_CLASS: dict[str, Rule] = {r.classification: r for r in _ALL if r.id.startswith("AR-PS")}
