/// Within `InlineExecution.$isOn.withValue(true) { ... }`, a command that becomes ready runs at once
/// on the current thread instead of being handed to its queue. Everything triggered synchronously
/// from that closure (virtual-clock timers, `.immediate` deliveries, inputs subscribed by
/// combinators) inherits the mode, so a marble test runs a whole graph deterministically without
/// waiting. Only tests turn it on; the library reads it where a command is handed over (and skips
/// admission while it is on).
package enum InlineExecution {
    @TaskLocal package static var isOn = false
}
