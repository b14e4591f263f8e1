"""The broker: composition root of one node. It builds the node's services, wires them
together and runs them; it holds no business logic of its own.

Start-up order (SEEDS BST-03, Kafka's BrokerState NOT_RUNNING -> STARTING -> RUNNING):

1. start this node's replica of the metadata quorum (`trafka.metadata_quorum`, a one-voter
   Raft group by default, journal in `<first log dir>/quorum`) and wait until it is ready;
   read or create `/cluster/id`; apply the dynamic broker configs of the tree;
2. load topics from the tree (`TopicManager.load`), so topics survive restarts;
3. open the log directories (`LocalLogs`: recovery, checkpoints);
4. build the services (below) and start the replica manager, the fetchers and the group
   coordinator's timers;
5. register `/brokers/ids/<id>` (ephemeral, Kafka's registration JSON; re-registered when
   the session is lost);
6. bind the listeners (a busy port fails start-up with a one-line `StartupError`,
   `trafka.node.startup`) and serve; run log maintenance (retention, flush, checkpoints)
   periodically in a worker thread; on a voter, run the controller; on every node (a
   broker-only one too) follow config change notifications and once, after a quorum
   barrier, delete stray logs (`trafka.node.node_tasks`; KAFKA-14616).

The services are listed, one typed port each, in `NodeServices`
(`trafka.node.handlers.context`), which is what handlers see (`ctx.services`); the broker
also runs the replica fetchers, the config change listener and the stray-log cleanup.

Shutdown (SIGTERM/SIGINT from knode): first a controlled shutdown
(`trafka.node.controlled_shutdown`: the controller moves this node's leaders away; bounded,
retried), then stop accepting, cancel request tasks, close the logs (flush + checkpoints),
close the metadata store (the ephemeral registration goes away).

Cluster (issue 5): every voter runs a `ControllerService` (it becomes the controller when it
wins `/controller`); a broker-only node (`process.roles=broker`) is a learner of the quorum
and runs none. One node is simply a cluster of one: controller, leader of everything, ISR of
one.

Listeners (`trafka.node.security.listeners`, docs/security.md): each named listener has its
security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL; `trafka.node.security.setup`);
the broker's own clients (controller channel, replica fetchers, controlled shutdown) use the
inter-broker listener (`InterBrokerClient`), and only it admits API 4-7 and follower fetches
(`trafka.node.security.inter_broker.refuse_if_not_admitted`, asked in `dispatch`).

Not implemented here: multiple log dirs beyond passing them to the LogManager.
"""

from __future__ import annotations

import functools
import logging
import random
import time

import trio

from trafka.net import protocol
from trafka.net import server as net_server
from trafka.net.headers import RequestHeader
from trafka.net.security import ConnectionSession
from trafka.net.server import RequestTurn
from trafka.node import node_tasks, startup
from trafka.node.clock import SYSTEM_CLOCK, Clock
from trafka.node.config.broker import BrokerConfig
from trafka.node.config.service import ConfigService, read_dynamic_config
from trafka.node.controlled_shutdown import ControlledShutdownClient
from trafka.node.controller.isr_writes import TreeIsrWrites
from trafka.node.controller.setup import controller_for
from trafka.node.fetch_sessions import FetchSessionCache
from trafka.node.group_service import GroupService
from trafka.node.handlers.context import NodeServices, RequestContext
from trafka.node.handlers.registry import HandlerRegistry, load_all
from trafka.node.local_logs import LocalLogs
from trafka.node.metadata_cache import MetadataCache
from trafka.node.metadata_store import MetadataStore
from trafka.node.metrics_service import MetricsService, start_metrics
from trafka.node.node_tasks import QuorumListeners
from trafka.node.producer_ids import ProducerIdManager
from trafka.node.quota.manager import QuotaManager
from trafka.node.quota.service import QuotaService
from trafka.node.quota.throttling import with_throttle_time
from trafka.node.registration import follow_quorum_events, load_cluster_id, register
from trafka.node.replication.replica_fetcher import ReplicaFetchers
from trafka.node.replication.replica_manager import ReplicaManager
from trafka.node.replication.replica_selector import check_selector_class
from trafka.node.security.inter_broker import InterBrokerClient, refuse_if_not_admitted
from trafka.node.security.listeners import resolve_listeners
from trafka.node.security.setup import (
    acl_service_for,
    authorizer_for,
    inter_broker_client_for,
    listeners_for,
)
from trafka.node.startup import StartupError
from trafka.node.topic_admin import TopicAdmin
from trafka.node.topics import TopicManager
from trafka.node.txn_service import TransactionService
from trafka.security.principal import ANONYMOUS

__all__ = ["Broker", "StartupError"]

log = logging.getLogger("trafka.node.broker")

MAINTENANCE_INTERVAL_S = 5.0


class Broker:
    """One trafka node. `await broker.run(task_status=...)` serves until cancelled."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        registry: HandlerRegistry | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.config = config
        """The static config (the services follow the dynamic one: `services.configs`)."""
        self.node_id = config.node_id
        self.registry = registry or load_all()
        self.clock = clock
        self.listener_specs = resolve_listeners(config)
        """The named listeners (ConfigError with one line on a bad listener config)."""
        self.inter_broker_listener = next(s.name for s in self.listener_specs if s.inter_broker)
        self.authorizer = authorizer_for(config)
        """allow-all, or ACLs (`authorizer.class.name`, `trafka.node.security.acls`)."""
        self.inter_broker = InterBrokerClient(self.inter_broker_listener)
        """Set up with the inter-broker listener's TLS/SASL client side in `_serve`."""
        self.services: NodeServices | None = None
        """The node's services once serving (`run`)."""
        self.bound_ports: list[int] = []
        self._rng = random.Random()
        self._store: MetadataStore | None = None
        self._logs: LocalLogs | None = None
        self._shutdown: ControlledShutdownClient | None = None
        self._supported: protocol.SupportedApis | None = None
        self._supported_ready = trio.Event()
        self._quorum_listeners: QuorumListeners = []
        self.metrics: MetricsService | None = None

    # ---- requests ----------------------------------------------------------------------------
    async def dispatch(
        self,
        header: RequestHeader,
        request: object,
        client_host: str,
        turn: RequestTurn | None = None,
        *,
        listener_name: str | None = None,
        session: ConnectionSession | None = None,
        request_bytes: int = 0,
        channel: net_server.ChannelThrottle | None = None,
    ) -> object:
        handler = self.registry.get(header.api_key)
        assert handler is not None and self.services is not None
        ctx = RequestContext(
            services=self.services,
            api_key=header.api_key,
            api_version=header.api_version,
            correlation_id=header.correlation_id,
            client_id=header.client_id,
            client_host=client_host,
            turn=turn or RequestTurn.first(),
            principal=ANONYMOUS if session is None else session.principal,
            listener_name=listener_name or self.inter_broker_listener,
            security_protocol="PLAINTEXT" if session is None else session.security_protocol,
            session=session,
            channel=channel,
        )
        refused = await refuse_if_not_admitted(
            header.api_key,
            request,
            store=self.services.store,
            authorizer=self.services.authorizer,
            requester=ctx.requester,
            inter_broker_listener=self.inter_broker_listener,
            own_broker_id=self.node_id,
        )
        if refused is not None:
            return refused
        started_s = time.perf_counter()
        response: object = await handler.handle(ctx, request)
        quotas = self.services.quotas
        if quotas is not None and quotas.manager.any_client_quota:
            response, throttle_ms = self._throttle(
                quotas, ctx, request, response, started_s, request_bytes
            )
            if channel is not None and throttle_ms > 0:
                channel.mute_for(throttle_ms)
        return response

    def _throttle(
        self,
        quotas: QuotaService,
        ctx: RequestContext,
        request: object,
        response: object,
        started_s: float,
        request_bytes: int,
    ) -> tuple[object, int]:
        """Client quotas (`trafka.node.quota.throttling`): record the request's cost, put
        the throttle time in the response; the caller mutes the connection for it."""
        released_s = ctx.turn.released_at
        ended_s = released_s if started_s <= released_s else time.perf_counter()
        throttle_ms = quotas.charge(
            ctx.api_key,
            request,
            response,
            user=ctx.principal.name,
            client_id=ctx.client_id or "",
            request_bytes=request_bytes,
            handler_ms=(ended_s - started_s) * 1000,
        )
        if throttle_ms <= 0 or response is None:
            return response, throttle_ms
        return with_throttle_time(ctx.api_key, ctx.api_version, response, throttle_ms), throttle_ms

    async def _handle_net_request(self, net_ctx: net_server.RequestContext) -> object:
        return await self.dispatch(
            net_ctx.header,
            net_ctx.request,
            net_ctx.peer_host,
            net_ctx.turn,
            listener_name=net_ctx.listener_name,
            session=net_ctx.session,
            request_bytes=net_ctx.size,
            channel=net_ctx.channel,
        )

    async def _prepare_supported_apis(self) -> None:
        """Build the version table (message classes load when a version is first used;
        tests check that every version has its schemas: `SupportedApis.missing_schemas`)."""
        self._supported = self.registry.supported_apis()
        self._supported_ready.set()

    async def controlled_shutdown(self) -> bool:
        """Before stopping: ask the controller to move this node's leaders away."""
        return False if self._shutdown is None else await self._shutdown.run()

    # ---- lifecycle ---------------------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as quorum_nursery:
            quorum_nursery.start_soon(self._prepare_supported_apis)
            try:
                store = await startup.open_store(self.config, quorum_nursery)
                self._store = store
                await self._serve(store, task_status)
            finally:
                # Stop the quorum's own tasks (session keeper) before the transport closes:
                # nothing may propose to a destroyed transport.
                quorum_nursery.cancel_scope.cancel()
                with trio.CancelScope(shield=True):
                    await self._close()

    async def _serve(self, store: MetadataStore, task_status: trio.TaskStatus[None]) -> None:
        node_id, clock = self.node_id, self.clock
        self.inter_broker = inter_broker_client_for(self.config, self.listener_specs)
        cluster_id = await load_cluster_id(store, self.config.get("cluster.id"))
        config = await read_dynamic_config(store, node_id, self.config)
        # The topic cache validates configs against the effective broker config, which the
        # config service (built once the logs are open) owns from then on.
        topics = TopicManager(
            store,
            node_id=node_id,
            live_brokers=lambda: metadata.live_broker_ids(),
            racks=lambda: metadata.racks(),
            validate_configs=lambda overrides: configs.validate_topic_configs(overrides),
            rng=self._rng,
        )
        metadata = MetadataCache(
            store, topics, node_id=node_id, inter_broker_listener=self.inter_broker_listener
        )
        await topics.load()
        logs = await trio.to_thread.run_sync(
            functools.partial(startup.open_logs, config, topics, cluster_id, now_ms=clock.now_ms())
        )
        self._logs = logs
        configs = ConfigService(
            store=store, node_id=node_id, config=config, topics=topics, logs=logs
        )
        replicas = ReplicaManager(
            node_id=node_id,
            topics=topics,
            log_manager=logs,
            log_config_for=configs.log_config_for,
            store=store,
            isr_writes=TreeIsrWrites(store),
            clock=clock,
            replica_lag_time_max_ms=config.get_int("replica.lag.time.max.ms"),
        )
        fetchers = ReplicaFetchers(
            node_id=node_id,
            replica_manager=replicas,
            endpoint_for=metadata.endpoint_for,
            clock=clock,
            inter_broker=self.inter_broker,
            fetch_wait_max_ms=config.get_int("replica.fetch.wait.max.ms"),
            fetch_max_bytes=config.get_int("replica.fetch.max.bytes"),
            backoff_ms=config.get_int("replica.fetch.backoff.ms"),
            num_fetchers=config.get_int("num.replica.fetchers"),
        )
        replicas.fetchers = fetchers
        replicas.replica_selector = check_selector_class(config.get("replica.selector.class"))
        replicas.broker_racks = metadata.racks
        configs.on_throttles.append(replicas.refresh_throttles)
        topic_admin = TopicAdmin(
            store=store, topics=topics, metadata=metadata, config=lambda: configs.config
        )
        groups = GroupService(
            node_id=node_id,
            topics=topics,
            metadata=metadata,
            admin=topic_admin,
            replicas=replicas,
            config=lambda: configs.config,
            clock=clock,
        )
        configs.on_group_configs.append(groups.apply_group_config)
        producer_ids = ProducerIdManager(store, node_id=node_id)
        transactions = TransactionService(  # trafka.node.txn_service
            node_id=node_id,
            topics=topics,
            metadata=metadata,
            admin=topic_admin,
            replicas=replicas,
            producer_ids=producer_ids,
            groups=groups,
            config=lambda: configs.config,
            inter_broker=self.inter_broker,
            clock=clock,
        )
        # Only a voter competes for /controller; a broker-only node (a quorum learner)
        # never runs the controller (KRaft's process.roles=broker).
        controller = (
            controller_for(
                node_id=node_id,
                store=store,
                clock=clock,
                configs=configs,
                inter_broker=self.inter_broker,
            )
            if self.config.is_controller
            else None
        )
        acls = acl_service_for(self.authorizer, store, clock)
        quotas = QuotaService(
            store,
            QuotaManager(
                window_num=config.get_int("quota.window.num"),
                window_size_ms=config.get_int("quota.window.size.seconds") * 1000,
            ),
            now_ms=clock.now_ms,
        )
        quotas.load()
        configs.on_quota_entities.append(quotas.apply_path)
        services = NodeServices(
            node_id=node_id,
            cluster_id=cluster_id,
            store=store,
            metadata=metadata,
            topics=topics,
            topic_admin=topic_admin,
            configs=configs,
            producer_ids=producer_ids,
            groups=groups,
            transactions=transactions,
            replicas=replicas,
            logs=logs,
            controller=controller,
            authorizer=self.authorizer,
            acls=acls,
            fetch_sessions=FetchSessionCache(
                config.get_int("max.incremental.fetch.session.cache.slots"), rng=random.Random()
            ),
            quotas=quotas,
        )
        self.services = services
        self._shutdown = ControlledShutdownClient(
            node_id=node_id,
            metadata=metadata,
            config=lambda: configs.config,
            inter_broker=self.inter_broker,
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                follow_quorum_events,
                store,
                self._quorum_listeners,
                functools.partial(self._register_again, store, metadata, topics),
            )
            nursery.start_soon(
                logs.run_maintenance,
                min(
                    MAINTENANCE_INTERVAL_S, config.get_int("log.retention.check.interval.ms") / 1000
                ),
                clock.now_ms,
            )
            nursery.start_soon(replicas.run)
            nursery.start_soon(fetchers.run)
            # Before the listener opens: its timer loads the `__consumer_offsets` partitions
            # this node leads (also after a failover) and fires session expiries from
            # start-up, not from the first call.
            await nursery.start(groups.run)
            await nursery.start(transactions.run)
            # Registered before the listener opens: a client's first Metadata must list us.
            await register(
                store, self.config, now_ms=self.clock.now_ms(), listeners=self.listener_specs
            )
            await metadata.refresh_brokers()
            if acls is not None:
                await node_tasks.start_acls(nursery, acls, store, self._quorum_listeners)
            await self._start_server(nursery, store)
            if controller is not None:
                node_tasks.start_controller(nursery, controller, self._quorum_listeners)
            # Every node, a broker-only one too, applies dynamic config changes and deletes
            # its stray logs once.
            node_tasks.start_config_changes(nursery, store, configs, clock, self._quorum_listeners)
            node_tasks.start_stray_log_cleanup(nursery, store, node_id, logs, replicas)
            log.info(
                "node %d serving on %s (cluster %s, process.roles=%s%s)",
                node_id,
                ",".join(listener.uri() for listener in self.config.listeners),
                cluster_id,
                ",".join(self.config.process_roles),
                "" if self.config.is_controller else ": a quorum learner, never the controller",
            )
            task_status.started()

    async def _register_again(
        self, store: MetadataStore, metadata: MetadataCache, topics: TopicManager
    ) -> None:
        """After a lost session or event stream: the registration and the caches again."""
        await register(
            store, self.config, now_ms=self.clock.now_ms(), listeners=self.listener_specs
        )
        await metadata.refresh_brokers()
        await topics.load()

    async def _start_server(self, nursery: trio.Nursery, store: MetadataStore) -> None:
        """Bind the listeners (trafka.net's KafkaServer); a busy port is a StartupError."""
        await self._supported_ready.wait()
        assert self._supported is not None
        assert self.services is not None
        kafka_server = net_server.KafkaServer(
            self._handle_net_request,
            self._supported,
            startup.server_config(self.services.configs.config, self.inter_broker_listener),
            connection_policy=self.services.quotas,
        )
        self._follow_connection_limits(kafka_server)
        self.metrics = await start_metrics(
            nursery, self.config.get("metrics.listener") or "", self.services, kafka_server
        )
        listeners = listeners_for(self.config, self.listener_specs, store)
        self.bound_ports = await startup.serve(nursery, kafka_server, listeners, self.config)

    def _follow_connection_limits(self, kafka_server: net_server.KafkaServer) -> None:
        """max.connections*, max.connection.creation.rate (and their listener.name.<l>.
        forms) from the effective config, now and on every dynamic change."""
        assert self.services is not None
        quotas = self.services.quotas

        def apply(config: BrokerConfig) -> None:
            try:
                server_config = startup.server_config(config, self.inter_broker_listener)
            except ValueError as error:  # refused when set; a hand-written znode may hold it
                log.error("connection limits unchanged: %s", error)
                return
            kafka_server.reconfigure(server_config)
            if quotas is not None:
                quotas.manager.set_connection_creation_rates(
                    *startup.connection_creation_rates(config)
                )

        apply(self.services.configs.config)
        self.services.configs.on_broker_config.append(apply)

    async def _close(self) -> None:
        logs, self._logs = self._logs, None
        if logs is not None:
            try:
                logs.close()
            except Exception:
                log.exception("closing the logs failed")
        store, self._store = self._store, None
        if store is not None:
            await store.close()
