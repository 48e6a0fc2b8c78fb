"""All registry I/O (OCI distribution API) on httpx: token (and Basic) challenges answered with the user's
credentials, every call bounded in time and size, every reply checked, one clear line for each failure (exit 2).

oras-py lays out the pushed manifest (`oras.oci`, its documented helpers); its request loop is not used: it
retries any failure five times with sleeps up to 83 s, sends no timeout, reads replies whole, follows `Link`
pages to any host with our token, and is extended only through its private hooks (docs/platform-stack.md).
"""

from platform_stack.registry.client import MANIFEST_MEDIA_TYPE, MAX_TAGS, TAG_PAGE, RegistryClient, connect
from platform_stack.registry.replies import MAX_BODY, RegistryFailure
from platform_stack.registry.transport import CONNECT_TIMEOUT, DEADLINE, READ_TIMEOUT, Bounds

__all__ = ["CONNECT_TIMEOUT", "DEADLINE", "MANIFEST_MEDIA_TYPE", "MAX_BODY", "MAX_TAGS", "READ_TIMEOUT", "TAG_PAGE",
           "Bounds", "RegistryClient", "RegistryFailure", "connect"]
