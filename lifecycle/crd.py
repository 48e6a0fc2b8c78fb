"""The CRD sources of what the operator keeps in its own namespace (lifecycle/schema/): the gate's baselines, the
holders of public hostnames and the SourceCredentials (lifecycle.credentials.spec), generated like every other CRD,
and the administrators' HostnamePolicies (lifecycle.hostname_policy) and ServiceProviders (lifecycle.service_provider),
both cluster-scoped;
OPERATOR_CRDS is every CRD the operator needs installed (`apprafter crds` prints them with the PlatformStack's)."""

from __future__ import annotations

from compatibility.crd import ALL_CRDS
from lifecycle.credentials.spec import SOURCE_CREDENTIAL
from lifecycle.hostname_policy import HOSTNAME_POLICY
from lifecycle.service_provider import SERVICE_PROVIDER
from renderer.crds import AGE, Column, CrdSource, cel

__all__ = ["BASELINE", "HOSTNAME_POLICY", "OPERATOR_CRDS", "PUBLIC_HOSTNAME", "SERVICE_PROVIDER", "SOURCE_CREDENTIAL"]

BASELINE = CrdSource(
    "ApplicationBaseline", "lifecycle", "baseline.cue", "ApplicationBaselineSpec", "applicationbaselines",
    ("arbase",),
    # The deployment a baseline belongs to never changes (the uid does: the Application may be created again).
    # CEL reserves `namespace`: the API server exposes that property as __namespace__.
    patches=(cel(("spec", "application"), "self.__namespace__ == oldSelf.__namespace__ && self.name == oldSelf.name && "
                 "self.environment == oldSelf.environment", "spec.application names the deployment this baseline "
                 "belongs to: it never changes", "FieldValueForbidden"),),
    columns=(Column("Namespace", ".spec.application.namespace"), Column("Application", ".spec.application.name"),
             Column("Environment", ".spec.application.environment"),
             Column("Image", ".spec.effectiveSpec.image", priority=1), AGE),
)
PUBLIC_HOSTNAME = CrdSource(
    "PublicHostname", "lifecycle", "hostname.cue", "PublicHostnameSpec", "publichostnames", ("phost",),
    patches=(cel((), "self.metadata.name == self.spec.hostname", "a PublicHostname is named by its hostname"),
             cel(("spec",), "self.hostname == oldSelf.hostname", "spec.hostname never changes",
                 "FieldValueForbidden")),
    columns=(Column("Namespace", ".spec.holder.namespace"), Column("Application", ".spec.holder.name"),
             Column("Environment", ".spec.holder.environment"), AGE),
)
OPERATOR_CRDS = (*ALL_CRDS, BASELINE, HOSTNAME_POLICY, PUBLIC_HOSTNAME, SERVICE_PROVIDER, SOURCE_CREDENTIAL)
