"""UpdateFeatures v0-2 (KIP-584): refused, as Kafka refuses a feature it does not support.

trafka finalizes no feature flags (ApiVersions lists no supported or finalized features, so
`Admin.describeFeatures` and `kafka-features describe` show none; `metadata.version`,
`kraft.version`, `transaction.version` and `group.version` have no meaning for a quorum that
emulates ZooKeeper's tree). Every update therefore names a feature this cluster does not
support, and gets the answer Kafka's controller gives for one (FeatureControlManager):
INVALID_UPDATE_VERSION, "Invalid update version N for feature F. The controller does not
support the given feature." The first refused update decides the request's error, as in
KRaft, where an UpdateFeatures request succeeds or fails as a whole.

* v0: feature_updates with allow_downgrade; results per feature.
* v1: upgrade_type instead of allow_downgrade, validate_only (KIP-778).
* v2: no per-feature results (the top-level error only).

Authorization: ALTER on the CLUSTER, else CLUSTER_AUTHORIZATION_FAILED. An empty update
list succeeds (Kafka's Admin client refuses to send one).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from trafka.net.api_keys import ApiKey
from trafka.net.kio_shape import build, response_class
from trafka.node.handlers.context import RequestContext
from trafka.node.handlers.registry import register
from trafka.security.authorizer import AclOperation


@register(api_key=ApiKey.UPDATE_FEATURES, name="UpdateFeatures", min_version=0, max_version=2)
async def handle(ctx: RequestContext, request: Any) -> Any:
    updates = list(request.feature_updates)
    error, message = ErrorCode.none, None
    if not ctx.authorize(AclOperation.ALTER):
        error = ErrorCode.cluster_authorization_failed
    elif updates:
        first = updates[0]
        error = ErrorCode.invalid_update_version
        message = (
            f"Invalid update version {int(first.max_version_level)} for feature "
            f"{first.feature}. The controller does not support the given feature."
        )
    return build(
        response_class(request),
        {
            "throttle_time": 0,
            "error_code": int(error),
            "error_message": message,
            "results": [
                {"feature": str(u.feature), "error_code": int(error), "error_message": message}
                for u in updates
            ],
        },
    )
