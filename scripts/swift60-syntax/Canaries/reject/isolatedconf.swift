extension S: @MainActor P {}
