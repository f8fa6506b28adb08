let r = #/a+/#
