/// Within `InlineExecution.$isOn.withValue(true) { ... }`, a command that becomes ready runs at once
/// on the current thread instead of being handed to its queue. Everything triggered synchronously
/// from that closure (virtual-clock timers, `.immediate` deliveries, inputs subscribed by
/// combinators) inherits the mode, so a marble test runs a whole graph deterministically without
/// waiting. The library itself uses it only to start a ``CommandSubject`` in place (its run just
/// stores the sink), so nothing can be sent to a subject before it runs.
package enum InlineExecution {
    @TaskLocal package static var isOn = false
}
