"""DescribeClientQuotas' filter (KIP-546), as Kafka's `ZkAdminManager.describeClientQuotas`.

A filter is a list of components (entity type, match type, match) and `strict`:

* match type 0 (exact): the entity's name of that type is `match`;
* 1 (default): the entity is the default of that type (`<default>`);
* 2 (any specified): the entity has that type, named or default;
* a type without a component matches an entity without that type, and, unless `strict`,
  any entity.

User / client-id entities and ip entities are never mixed: a filter with an ip component
sees only ip entities, one with a user or client-id component only user / client-id
entities; mixing them is INVALID_REQUEST, as is a type given twice or an empty type; an
unknown type is UNSUPPORTED_VERSION ("Custom entity type ... not supported").
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trafka.node.quota.entities import (
    CLIENT_ID,
    DEFAULT,
    IP,
    USER,
    QuotaEntity,
    sanitize,
)


class MatchType(enum.IntEnum):
    EXACT = 0
    DEFAULT = 1
    SPECIFIED = 2


class FilterError(ValueError):
    def __init__(self, message: str, *, unsupported: bool = False) -> None:
        super().__init__(message)
        self.unsupported = unsupported


@dataclass(frozen=True, slots=True)
class Component:
    match_type: MatchType
    name: str | None
    """The sanitized name for EXACT."""

    def matches(self, entity_name: str | None) -> bool:
        if entity_name is None:
            return False
        if self.match_type is MatchType.EXACT:
            return entity_name == self.name
        if self.match_type is MatchType.DEFAULT:
            return entity_name == DEFAULT
        return True


@dataclass(frozen=True, slots=True)
class QuotaFilter:
    components: Mapping[str, Component]
    strict: bool

    @classmethod
    def parse(cls, wire: Sequence[tuple[str, int, str | None]], strict: bool) -> QuotaFilter:
        components: dict[str, Component] = {}
        for entity_type, match_type, match in wire:
            if entity_type == "":
                raise FilterError("Unexpected empty filter component entity type")
            if entity_type not in (USER, CLIENT_ID, IP):
                raise FilterError(
                    f"Custom entity type '{entity_type}' not supported", unsupported=True
                )
            if entity_type in components:
                name = {USER: "user", CLIENT_ID: "client", IP: "ip"}[entity_type]
                raise FilterError(f"Duplicate {name} filter component entity type")
            try:
                kind = MatchType(match_type)
            except ValueError:
                raise FilterError(f"Unexpected match type: {match_type}") from None
            if kind is MatchType.EXACT and match is None:
                raise FilterError("Exact match requires a name to match")
            components[entity_type] = Component(
                kind, sanitize(match) if kind is MatchType.EXACT and match is not None else None
            )
        if IP in components and (USER in components or CLIENT_ID in components):
            raise FilterError(
                "Invalid entity filter component combination, IP filter component should not "
                "be used with user or clientId filter component."
            )
        return cls(components, strict)

    def _matches(self, entity_type: str, name: str | None) -> bool:
        component = self.components.get(entity_type)
        if component is None:
            return name is None or not self.strict
        return component.matches(name)

    def matches(self, entity: QuotaEntity) -> bool:
        if entity.is_ip:
            if USER in self.components or CLIENT_ID in self.components:
                return False
            return self._matches(IP, entity.ip)
        if IP in self.components:
            return False
        return self._matches(USER, entity.user) and self._matches(CLIENT_ID, entity.client_id)

    def select(
        self, entities: Mapping[QuotaEntity, Mapping[str, float]]
    ) -> list[tuple[QuotaEntity, Mapping[str, float]]]:
        return [
            (e, v)
            for e, v in sorted(entities.items(), key=lambda i: i[0].path())
            if v and self.matches(e)
        ]
