@concurrent func f() async {}
