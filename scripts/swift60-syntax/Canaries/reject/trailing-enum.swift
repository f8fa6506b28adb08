enum E { case a(Int, b: Int, ) }
