"""A node's configuration: the broker's keys (`broker`), the topic-level keys DescribeConfigs
lists (`topic`), and the change notifications every broker follows (`changes`)."""
