"""What tools, the Spark jobs and nodes say to a running node over its Kafka listener.

`metadata`: reads of a live node's znode tree and quorum status (trafka's
TrafkaDescribeZNodes, Kafka's DescribeQuorum and Metadata). It sits below `trafka.node` in
the layers, so `trafka.tools` and `trafka.spark` use it without importing the node.
"""
