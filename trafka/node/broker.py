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
6. bind the listeners (a busy port fails start-up with a one-line `StartupError`) and serve;
   run log maintenance (retention, flush, checkpoints) periodically in a worker thread; on a
   voter, run the controller, follow config change notifications, and once, after a quorum
   barrier, delete stray logs (`trafka.node.stray_log_cleanup`, KAFKA-14616).

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
(`trafka.node.security.inter_broker`, asked in `dispatch`).

Not implemented here: multiple log dirs beyond passing them to the LogManager.
"""

from __future__ import annotations

import errno
import functools
import logging
import random
from collections.abc import Callable
from pathlib import Path

import trio
from kio.schema.errors import ErrorCode

from trafka.log.errors import LogError
from trafka.metadata_quorum.bridge import QuorumEvent
from trafka.metadata_quorum.config import QuorumConfigError
from trafka.net import protocol
from trafka.net import server as net_server
from trafka.net.headers import RequestHeader
from trafka.net.security import ConnectionSession
from trafka.net.server import RequestTurn
from trafka.node.clock import SYSTEM_CLOCK, Clock
from trafka.node.config.broker import BrokerConfig
from trafka.node.config.changes import ConfigChangeListener
from trafka.node.config.service import ConfigService, effective_log_config, read_dynamic_config
from trafka.node.controlled_shutdown import ControlledShutdownClient
from trafka.node.controller.isr_writes import TreeIsrWrites
from trafka.node.controller.service import ControllerService, controller_config_of
from trafka.node.group_service import GroupService
from trafka.node.handlers.context import NodeServices, RequestContext
from trafka.node.handlers.registry import HandlerRegistry, load_all
from trafka.node.local_logs import LocalLogs
from trafka.node.metadata_cache import MetadataCache
from trafka.node.metadata_store import MetadataStore, open_quorum_store
from trafka.node.producer_ids import ProducerIdManager
from trafka.node.registration import follow_quorum_events, load_cluster_id, register
from trafka.node.replication.replica_fetcher import ReplicaFetchers
from trafka.node.replication.replica_manager import ReplicaManager
from trafka.node.security import inter_broker, scram_store
from trafka.node.security.acls import AclService, AuthorizerConfigError, build_authorizer
from trafka.node.security.inter_broker import InterBrokerClient
from trafka.node.security.listeners import resolve_listeners
from trafka.node.security.setup import inter_broker_client, listener_security
from trafka.node.stray_log_cleanup import StrayLogCleanup
from trafka.node.topic_admin import TopicAdmin
from trafka.node.topics import TopicManager
from trafka.node.txn_service import TransactionService
from trafka.security.acl import AclAuthorizer
from trafka.security.authorizer import Authorizer, Requester
from trafka.security.principal import ANONYMOUS
from trafka.security.scram import ScramCredential

log = logging.getLogger("trafka.node.broker")

MAINTENANCE_INTERVAL_S = 5.0
QUORUM_DIR_NAME = "quorum"
"""The quorum's journal lives in <first log dir>/quorum (no '-': not a partition dir)."""


class StartupError(Exception):
    """A start-up failure with a one-line explanation (busy port, unreadable dir, ...)."""


def _first_os_error(raised: BaseException) -> OSError | None:
    if isinstance(raised, OSError):
        return raised
    if isinstance(raised, BaseExceptionGroup):
        for inner in raised.exceptions:
            found = _first_os_error(inner)
            if found is not None:
                return found
    return None


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
        try:
            self.authorizer: Authorizer = build_authorizer(config)
        except AuthorizerConfigError as error:
            raise StartupError(str(error)) from None
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
        self._quorum_listeners: list[Callable[[QuorumEvent], None]] = []
        """Called with every WatchEvent/SessionEvent of the node's quorum replica."""

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
        )
        claim = inter_broker.claim_of(header.api_key, request)
        if claim is not None:
            error = await inter_broker.admit(
                claim,
                quorum=self.services.store,
                authorizer=self.services.authorizer,
                requester=Requester(
                    ctx.principal, client_host, ctx.listener_name, ctx.security_protocol
                ),
                inter_broker_listener=self.inter_broker_listener,
                own_broker_id=self.node_id,
            )
            if error is not ErrorCode.none:
                log.warning(
                    "refused %s from %s on %s (%s as broker %d): %s",
                    handler.name,
                    client_host,
                    ctx.listener_name,
                    ctx.principal,
                    claim.sender,
                    error.name,
                )
                refused: object = inter_broker.refusal(request, error)
                return refused
        response: object = await handler.handle(ctx, request)
        return response

    async def _handle_net_request(self, net_ctx: net_server.RequestContext) -> object:
        return await self.dispatch(
            net_ctx.header,
            net_ctx.request,
            net_ctx.peer_host,
            net_ctx.turn,
            listener_name=net_ctx.listener_name,
            session=net_ctx.session,
        )

    def supported_apis(self) -> protocol.SupportedApis:
        return protocol.SupportedApis(
            protocol.ApiVersionRange(
                h.api_key, h.min_version, h.max_version, h.advertised_min_version
            )
            for h in self.registry.handlers()
        )

    async def _prepare_supported_apis(self) -> None:
        """Build (and schema-check) the version table in a worker thread while the quorum
        starts: it imports every kio message module (~1 s)."""
        self._supported = await trio.to_thread.run_sync(self.supported_apis)
        self._supported_ready.set()

    async def controlled_shutdown(self) -> bool:
        """Before stopping: ask the controller to move this node's leaders away."""
        return False if self._shutdown is None else await self._shutdown.run()

    # ---- lifecycle ---------------------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as quorum_nursery:
            quorum_nursery.start_soon(self._prepare_supported_apis)
            try:
                store = await self._open_store(quorum_nursery)
                self._store = store
                await self._serve(store, task_status)
            finally:
                # Stop the quorum's own tasks (session keeper) before the transport closes:
                # nothing may propose to a destroyed transport.
                quorum_nursery.cancel_scope.cancel()
                with trio.CancelScope(shield=True):
                    await self._close()

    def _setup_inter_broker_client(self) -> None:
        from trafka.net.tls import TlsConfigError

        spec = next(s for s in self.listener_specs if s.inter_broker)
        try:
            security = inter_broker_client(self.config, spec)
        except TlsConfigError as tls_error:
            raise StartupError(
                f"cannot set up the inter-broker client's TLS: {tls_error}"
            ) from None
        self.inter_broker = InterBrokerClient(self.inter_broker_listener, security)

    async def _serve(self, store: MetadataStore, task_status: trio.TaskStatus[None]) -> None:
        node_id, clock = self.node_id, self.clock
        self._setup_inter_broker_client()
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
        logs = await trio.to_thread.run_sync(self._open_logs, config, topics, cluster_id)
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
        )
        replicas.fetchers = fetchers
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
        controller = self._controller(store, configs) if self.config.is_controller else None
        acls = None
        if isinstance(self.authorizer, AclAuthorizer):
            acls = AclService(self.authorizer, store, now_ms=clock.now_ms)
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
                # Every node loads the ACLs before serving and follows their changes.
                await store.sync()
                acls.reload()
                self._quorum_listeners.append(acls.on_quorum_event)
                nursery.start_soon(acls.run)
            await self._start_server(nursery, store)
            if controller is not None:
                self._quorum_listeners.append(controller.wake)
                nursery.start_soon(controller.run)
                config_listener = ConfigChangeListener(
                    store,
                    apply=configs.apply_config_change,
                    rescan=configs.rescan_configs,
                    now_ms=clock.now_ms,
                )
                self._quorum_listeners.append(config_listener.on_quorum_event)
                nursery.start_soon(config_listener.run)
                cleanup = StrayLogCleanup(
                    store=store, node_id=node_id, logs=logs, replicas=replicas
                )
                nursery.start_soon(cleanup.run)
            log.info(
                "node %d serving on %s (cluster %s, process.roles=%s%s)",
                node_id,
                ",".join(listener.uri() for listener in self.config.listeners),
                cluster_id,
                ",".join(self.config.process_roles),
                "" if self.config.is_controller else ": a quorum learner, never the controller",
            )
            task_status.started()

    def _controller(self, store: MetadataStore, configs: ConfigService) -> ControllerService:
        controller = ControllerService(
            node_id=self.node_id,
            store=store,
            clock=self.clock,
            config=controller_config_of(configs.config),
            inter_broker=self.inter_broker,
        )
        # Kafka's enableDefaultUncleanLeaderElection / enableTopicUncleanLeaderElection.
        configs.on_broker_config.append(
            lambda changed: controller.unclean_default_changed(
                changed.get_bool("unclean.leader.election.enable")
            )
        )
        configs.on_notified_topics.append(controller.topic_configs_changed)
        return controller

    async def _open_store(self, nursery: trio.Nursery) -> MetadataStore:
        """Start this node's replica of the metadata quorum and wait until it is ready."""
        first_dir = self.config.log_dirs[0]
        try:
            first_dir.mkdir(parents=True, exist_ok=True)
            return await open_quorum_store(
                self.config.quorum_properties(), self.node_id, first_dir / QUORUM_DIR_NAME, nursery
            )
        except QuorumConfigError as error:
            raise StartupError(f"invalid quorum configuration: {error}") from None
        except OSError as error:
            raise StartupError(f"cannot start the metadata quorum: {error}") from None

    async def _register_again(
        self, store: MetadataStore, metadata: MetadataCache, topics: TopicManager
    ) -> None:
        """After a lost session or event stream: the registration and the caches again."""
        await register(
            store, self.config, now_ms=self.clock.now_ms(), listeners=self.listener_specs
        )
        await metadata.refresh_brokers()
        await topics.load()

    def _open_logs(self, config: BrokerConfig, topics: TopicManager, cluster_id: str) -> LocalLogs:
        try:
            return LocalLogs(
                [Path(d) for d in config.log_dirs],
                effective_log_config(config, {}),
                now_ms=self.clock.now_ms(),
                node_id=self.node_id,
                cluster_id=cluster_id,
                topic_configs={
                    name: effective_log_config(config, state.configs)
                    for name, state in topics.topics.items()
                },
            )
        except (OSError, LogError) as error:
            raise StartupError(f"cannot open log directories: {error}") from None

    async def _start_server(self, nursery: trio.Nursery, store: MetadataStore) -> None:
        """Bind the listeners (trafka.net's KafkaServer); a busy port is a StartupError."""
        config = net_server.ServerConfig(
            socket_request_max_bytes=self.config.get_int("socket.request.max.bytes"),
            max_connections=self.config.get_int("max.connections"),
            max_connections_per_ip=self.config.get_int("max.connections.per.ip"),
            max_connections_per_ip_overrides=net_server.parse_connection_overrides(
                self.config.get("max.connections.per.ip.overrides") or ""
            ),
            queued_max_request_bytes=self.config.get_int("queued.max.request.bytes"),
            connections_max_idle_ms=self.config.get_int("connections.max.idle.ms"),
            max_in_flight_requests=min(self.config.get_int("queued.max.requests"), 64),
        )
        await self._supported_ready.wait()
        assert self._supported is not None
        kafka_server = net_server.KafkaServer(self._handle_net_request, self._supported, config)
        from trafka.net.tls import TlsConfigError

        def scram_lookup(user: str, mechanism: str) -> ScramCredential | None:
            return scram_store.lookup(store, user, mechanism)

        try:
            listeners = [
                net_server.Listener(
                    spec.name,
                    spec.host or "0.0.0.0",
                    spec.port,
                    listener_security(self.config, spec, scram_lookup),
                )
                for spec in self.listener_specs
            ]
        except TlsConfigError as tls_error:
            raise StartupError(f"cannot set up TLS: {tls_error}") from None
        try:
            bound = await nursery.start(kafka_server.serve, listeners)
        except (OSError, ExceptionGroup) as raised:
            error = _first_os_error(raised)
            if error is None:
                raise
            uri = ",".join(listener.uri() for listener in self.config.listeners)
            if error.errno == errno.EADDRINUSE:
                raise StartupError(f"cannot listen on {uri}: address already in use") from None
            raise StartupError(f"cannot listen on {uri}: {error.strerror or error}") from None
        self.bound_ports = [b.port for b in bound]

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
