/// The `# HELP` line of every metric family the server exposes (the Prometheus text format
/// wants one per family; `promtool check metrics` refuses families without). swift-metrics has
/// no place for help text, so `ServerMetrics.render` adds these lines before each family's
/// `# TYPE` line. A family missing here fails `MetricsTests`.
enum MetricHelp {
    static let text: [String: String] = [
        "rtm_connections": "Logged-in MESSAGE connections (concurrent users) and joined STREAM connections.",
        "rtm_websocket_connections": "Open WebSocket connections, logged in or not.",
        "rtm_pcu": "Peak of logged-in MESSAGE connections since the start (PCU).",
        "rtm_sessions": "Sessions, online or within their grace window.",
        "rtm_logins_total": "Logins by outcome (ok, resumed, rejected).",
        "rtm_login_rejections_total": "Refused logins by the error code's name.",
        "rtm_messages_received_total": "Messages accepted from clients: channel publishes, user messages, topic messages.",
        "rtm_messages_sent_total": "Messages written to recipients (a channel message counts once per subscriber).",
        "rtm_deliveries_total": "Fan-out writes: one encoded frame (a batch of channel messages, or a channel event) to one subscriber.",
        "rtm_received_bytes_total": "WebSocket payload bytes read from clients.",
        "rtm_sent_bytes_total": "WebSocket payload bytes written to clients.",
        "rtm_replays_total": "Replays after a resume or a subscription with positions.",
        "rtm_replayed_frames_total": "Message frames re-sent by replays.",
        "rtm_gaps_total": "Gap notices sent (messages that could not be replayed).",
        "rtm_slow_consumers_dropped_total": "Connections cut off because their outbound backlog passed maxOutboundBytes.",
        "rtm_disconnects_total": "WebSocket connections ended, by cause.",
        "rtm_goaways_sent_total": "goaway frames sent (drain, shutdown).",
        "rtm_request_duration_seconds": "Time a request took on its event loop, by request type (a publish: per read batch).",
        "rtm_user_message_store_commit_seconds": "One user-message store transaction (a group commit).",
        "rtm_user_message_store_commits_total": "User-message store transactions.",
        "rtm_queue_depth": "Work waiting: user messages for the next store commit, metadata and history operations on the storage queue, undelivered webhook events.",
        "rtm_draining": "1 while the server drains, else 0.",
        "rtm_database_up": "1 while this cluster node reaches its database, else 0.",
        "rtm_cluster_publish_commit_seconds": "A cluster publish's commit in the database (group commit included).",
        "rtm_cluster_log_lag_seconds": "Publish time to applied on this node, newest message of the last batch.",
        "rtm_cluster_nodes": "Cluster nodes with a live lease.",
        "rtm_cluster_gaps_total": "Cluster sequence numbers given up on (gap notices sent).",
        "rtm_cluster_lease_lapses_total": "Times this node's lease ran out while it could not reach the database (cut off from it, or the database down for every node).",
        "rtm_cluster_cut_off_total": "Times this node found itself cut off from the database while another node reached it; its clients were sent away.",
        "rtm_cluster_fenced_total": "Times the other nodes declared this node dead (paused or cut off past its lease); its clients were sent away.",
        "rtm_requests_refused_total": "Requests answered with an error, by the error code's name.",
        "rtm_auth_hook_requests_total": "Authorization hook questions by event (connect, subscribe, publish) and outcome (allow, deny, cached, failed, breaker_open).",
        "rtm_auth_hook_breaker_open": "1 while the authorization hook's circuit breaker is open (requests answered by their namespace's failure mode without asking).",
        "rtm_webhook_events_delivered_total": "Webhook events delivered (a 2xx answer).",
        "rtm_webhook_delivery_failures_total": "Webhook POSTs that failed (each event is retried with backoff).",
        "rtm_webhook_events_dropped_total": "Webhook events given up: the queue was full (oldest first), or maxRetryDuration of failures passed.",
        "rtm_webhook_oldest_queued_seconds": "How long the oldest undelivered webhook event has waited (0: none waits).",
        "rtm_webhook_receiver_up": "0 from a failed webhook POST until the next delivered one, else 1.",
        "rtm_cluster_publish_failures_total": "Publishes answered with -11026 (the cluster's database link down or the commit failed).",
    ]

    /// `exposition` with a `# HELP` line before each family's `# TYPE` line (families without
    /// a text get none).
    static func annotate(_ exposition: String) -> String {
        var out = ""
        out.reserveCapacity(exposition.utf8.count + text.count * 96)
        for line in exposition.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("# TYPE "), let name = line.dropFirst(7).split(separator: " ").first,
               let help = text[String(name)] {
                out += "# HELP \(name) \(help)\n"
            }
            out += line
            out += "\n"
        }
        if out.hasSuffix("\n\n") { out.removeLast() }
        return out
    }
}
